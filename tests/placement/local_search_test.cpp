#include "placement/local_search.h"

#include <gtest/gtest.h>

#include "placement/paper_cost.h"
#include "test_topologies.h"

namespace tessel::placement {
namespace {

class CyclicPartitioningTest : public ::testing::TestWithParam<Gain> {};

TEST_P(CyclicPartitioningTest, KeepsEveryGroupBalancedAndTakesOnlyPositiveGain) {
  const Topology t = testing::scenario("5-worldwide-geo.yaml");
  const PaperCostModel model(t, {8, 8}, {0.65, 0.47125});
  CyclicPartitioning search(model.hop_weight(), model.sync_weight(), {8, 8}, GetParam());
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    Labels labels = random_labels({8, 8}, rng);
    const Labels before = labels;
    const double gain = search.run(labels);
    EXPECT_NO_THROW(check_balanced(labels, {8, 8}));
    EXPECT_GE(gain, 0.0);
    if (gain == 0.0) {
      EXPECT_EQ(labels, before);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gains, CyclicPartitioningTest,
                         ::testing::Values(Gain::Custom, Gain::KernighanLin));

// The Kernighan-Lin gain pulls well-connected devices together: on the two-site scenario it
// moves a random partition towards groups inside one site.
TEST(CyclicPartitioning, KernighanLinGainClustersBySite) {
  const Topology t = testing::scenario("3-multi-datacenter.yaml");
  const PaperCostModel model(t, {8, 8}, {0.65, 0.47125});
  CyclicPartitioning search(model.hop_weight(), model.sync_weight(), {8, 8}, Gain::KernighanLin);
  auto mixed_groups = [&](const Labels& labels) {
    int mixed = 0;
    for (const auto& g : groups_from_labels(labels, {8, 8})) {
      bool ohio = false, virginia = false;
      for (int d : g) (d < 32 ? ohio : virginia) = true;
      mixed += ohio && virginia;
    }
    return mixed;
  };
  int improved = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Rng rng(seed);
    Labels labels = random_labels({8, 8}, rng);
    const int before = mixed_groups(labels);
    for (int round = 0; round < 5; ++round) search.run(labels);
    improved += mixed_groups(labels) < before;
  }
  EXPECT_GE(improved, 8);
}

}  // namespace
}  // namespace tessel::placement
