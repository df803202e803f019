// The paper-mode cost model reproduces the reference code's figures.
#include "placement/paper_cost.h"

#include <gtest/gtest.h>

#include "test_topologies.h"

namespace tessel::placement {
namespace {

struct Figure {
  const char* file;
  double total, data_parallel, pipeline;
};

class IdentityLayoutFigures : public ::testing::TestWithParam<Figure> {};

TEST_P(IdentityLayoutFigures, MatchTheReferenceCode) {
  const Figure f = GetParam();
  const Topology t = testing::scenario(f.file);
  const PaperCostModel model(t, {8, 8}, {0.65, 0.47125});
  const Evaluation e = model.evaluate(testing::one_device_per_site_groups());
  EXPECT_NEAR(e.cost.data_parallel_s, f.data_parallel, 1e-4) << f.file;
  EXPECT_NEAR(e.cost.pipeline_s, f.pipeline, 1e-4) << f.file;
  EXPECT_NEAR(e.cost.total_s, f.total, 1e-4) << f.file;
  auto scratch = model.make_scratch();
  EXPECT_DOUBLE_EQ(model.cost(testing::one_device_per_site_groups(), *scratch), e.cost.total_s);
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, IdentityLayoutFigures,
    ::testing::Values(Figure{"1-datacenter-on-demand.yaml", 3.4398, 2.9120, 0.5278},
                      Figure{"3-multi-datacenter.yaml", 16.0869, 5.5169, 10.5700},
                      Figure{"4-regional-geo.yaml", 34.8021, 8.3421, 26.4600},
                      Figure{"5-worldwide-geo.yaml", 49.2184, 22.7584, 26.4600}));

TEST(PaperCost, DataParallelIsTheSlowestMembersSummedExchanges) {
  const Topology t = testing::scenario("5-worldwide-geo.yaml");
  const PaperCostModel model(t, {8, 8}, {0.65, 0.47125});
  // Group {0, 8}: Oregon-Virginia, 67 ms, 0.79 Gbit/s, D_DP = 8.
  const double expected = 2 * (0.067 + 8 * 0.65 / (8 * 0.79));
  EXPECT_NEAR(model.data_parallel_cost({0, 8}), expected, 1e-12);
}

TEST(PaperCost, HopsFollowTheStageOrderAndAchieveTheBottleneck) {
  const Topology t = testing::scenario("5-worldwide-geo.yaml");
  const PaperCostModel model(t, {8, 8}, {0.65, 0.47125});
  const Evaluation e = model.evaluate(testing::one_device_per_site_groups());
  ASSERT_EQ(e.hops.size(), 7u);
  double path = 0;
  for (const HopMatching& hop : e.hops) {
    double worst = 0;
    for (size_t i = 0; i < hop.from_device.size(); ++i) {
      const int a = hop.from_device[i], b = hop.to_device[i];
      worst = std::max(worst, t.latency_ms(a, b) / 1000 + 8 * 0.47125 / t.bandwidth_gbps(a, b));
    }
    EXPECT_DOUBLE_EQ(worst, hop.bottleneck_s);
    path += hop.bottleneck_s;
  }
  EXPECT_NEAR(2 * path, e.cost.pipeline_s, 1e-9);
}

TEST(PaperCost, RejectsAShapeThatDoesNotMatchTheTopology) {
  const Topology t = testing::scenario("1-datacenter-on-demand.yaml");
  EXPECT_THROW(PaperCostModel(t, {8, 4}, {}), std::invalid_argument);
}

}  // namespace
}  // namespace tessel::placement
