// tessel's own cost model: iteration time with compute speed, memory and schedules.
#include "placement/full_cost.h"

#include <gtest/gtest.h>

#include "placement/iteration_model.h"
#include "placement/layer_split.h"
#include "placement/ring_allreduce.h"
#include "placement/simulator.h"
#include "test_topologies.h"

namespace tessel::placement {
namespace {

TEST(LayerSplit, FasterStagesGetMoreLayers) {
  const Workload w = workload_preset("gpt3-1.3b");
  std::vector<StageCapacity> stages(4);
  for (auto& s : stages) s = {100e12, 80.0 * (1ULL << 30), 4, 1};
  stages[1].flops_per_s = 300e12;
  const LayerSplit split = split_layers(w, stages);
  ASSERT_TRUE(split.feasible);
  int sum = 0;
  for (int l : split.layers) sum += l;
  EXPECT_EQ(sum, 24);
  EXPECT_GT(split.layers[1], 2 * split.layers[0]);
}

TEST(LayerSplit, MemoryBoundsTheSplitAndReportsOverflow) {
  const Workload w = workload_preset("gpt3-1.3b");
  std::vector<StageCapacity> stages(2);
  for (auto& s : stages) s = {100e12, 80.0 * (1ULL << 30), 2, 1};
  stages[0].memory_bytes = stage_memory_bytes(w, 4, true, false, 2) + 1;  // room for 4 layers
  stages[0].flops_per_s = 1000e12;  // would take almost everything if memory allowed
  const LayerSplit split = split_layers(w, stages);
  ASSERT_TRUE(split.feasible);
  EXPECT_EQ(split.layers[0], 4);
  EXPECT_EQ(split.layers[1], 20);
  stages[1].memory_bytes = 1e9;  // 1 GB cannot hold one layer of 1.3B with Adam state
  const LayerSplit none = split_layers(w, stages);
  EXPECT_FALSE(none.feasible);
  EXPECT_GT(none.overflow_bytes, 0);
}

TEST(RingAllreduce, IsBandwidthOptimalOnAUniformRing) {
  const Topology t = testing::scenario("1-datacenter-on-demand.yaml");
  const RingPlan ring = plan_ring(t, {0, 8, 16, 24}, 1e9);
  ASSERT_EQ(ring.order.size(), 4u);
  // 2 (n-1) steps of bytes/n over 3.125 Gbit/s links, no latency.
  EXPECT_NEAR(ring_allreduce_s(ring, 1e9), 2.0 * 3 * (0.25e9 * 8 / 3.125e9), 1e-9);
  EXPECT_EQ(ring_allreduce_s(plan_ring(t, {5}, 1e9), 1e9), 0.0);
}

TEST(FullCost, PrefersKeepingDataParallelGroupsInsideSitesForLargeGradients) {
  // With the paper's GPT3-XL, gradient all-reduce over 0.3-1 Gbit/s WAN links dominates:
  // the full model (unlike the paper's latency-blind DataP sum) ranks one site per group first.
  const Topology t = testing::scenario("5-worldwide-geo.yaml");
  const FullCostModel model(t, {8, 8}, workload_preset("gpt3-1.3b"), {});
  auto s = model.make_scratch();
  const double site_groups = model.cost(testing::one_site_per_group(), *s);
  const double spread = model.cost(testing::one_device_per_site_groups(), *s);
  EXPECT_LT(site_groups, spread);
}

TEST(FullCost, EvaluationIsConsistentWithTheSimulator) {
  const Topology t = testing::scenario("4-regional-geo.yaml");
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved}) {
    FullCostOptions o;
    o.schedule = kind;
    const FullCostModel model(t, {8, 8}, workload_preset("gpt3-1.3b"), o);
    const Evaluation e = model.evaluate(testing::one_site_per_group());
    ASSERT_TRUE(e.cost.feasible) << to_string(kind);
    EXPECT_EQ(e.layer_split.size(), 8u);
    EXPECT_DOUBLE_EQ(e.predicted_iteration_s, e.cost.total_s);
    // Simulating the same timing event by event lands within a few percent.
    std::vector<std::vector<int>> pipelines(8, std::vector<int>(8));
    for (int r = 0; r < 8; ++r)
      for (int s = 0; s < 8; ++s)
        pipelines[r][s] = testing::one_site_per_group()[e.stage_group[s]][r];
    const PipelineTiming timing = model.pipeline_timing(pipelines);
    const double sim = simulate_iteration(model.schedule(), timing).iteration_s;
    const double closed = predict_iteration_s(model.schedule(), timing);
    EXPECT_NEAR(closed / sim, 1.0, 0.05) << to_string(kind);
  }
}

TEST(FullCost, InfeasibleWhenTheModelDoesNotFit) {
  const Topology t = testing::scenario("5-worldwide-geo.yaml");  // V100 16 GiB
  Workload big = workload_preset("gpt3-6.7b");
  big.layers = 8;
  big.hidden = 16384;  // ~3.2B parameters per layer: no 16 GiB GPU holds a layer with Adam
  big.heads = 128;
  const FullCostModel model(t, {8, 8}, big, {});
  auto s = model.make_scratch();
  const double c = model.cost(testing::one_site_per_group(), *s);
  EXPECT_GT(c, kInfeasibleCost);
  EXPECT_FALSE(model.evaluate(testing::one_site_per_group()).cost.feasible);
}

TEST(FullCost, OverlapNeverSlowerThanBlockingCommunication) {
  const Topology t = testing::scenario("5-worldwide-geo.yaml");
  FullCostOptions blocking;
  blocking.overlap = false;
  const FullCostModel on(t, {8, 8}, workload_preset("gpt3-1.3b"), {});
  const FullCostModel off(t, {8, 8}, workload_preset("gpt3-1.3b"), blocking);
  auto s1 = on.make_scratch();
  auto s2 = off.make_scratch();
  EXPECT_LT(on.cost(testing::one_site_per_group(), *s1),
            off.cost(testing::one_site_per_group(), *s2));
}

}  // namespace
}  // namespace tessel::placement
