// The low-communication mode as a placement resolves it (placement/data_parallel_choice.h, issue
// 15): the H the cost model priced the layout at, the bits, and why, as tessel plan, tessel local
// and the operator all say it.
#include "placement/data_parallel_choice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "placement/full_cost.h"
#include "placement/workload.h"
#include "test_topologies.h"

namespace tessel::placement {
namespace {

DataParallelMode given(int h, int bits) {
  DataParallelMode m = low_communication_chosen();
  m.choose_sync_every = false;
  m.choose_delta_bits = false;
  m.sync_every = h;
  m.delta_bits = bits;
  return m;
}

TEST(DataParallelChoice, ChosenHIsTheOneTheCostModelPricedTheLayoutAt) {
  Workload workload = workload_preset("gpt3-1.3b");
  workload.data_parallel = low_communication_chosen();
  workload.data_parallel.sync_every = 7;  // not on the ladder: unused when H is chosen
  workload.data_parallel.delta_bits = 4;  // likewise when the bits are chosen
  const FullCostModel model(testing::scenario("5-worldwide-geo.yaml"), {8, 8}, workload, {});
  // Each pipeline inside one site: every stage group spans the eight sites.
  std::vector<std::vector<int>> pipelines(8);
  for (int r = 0; r < 8; ++r)
    for (int s = 0; s < 8; ++s) pipelines[r].push_back(8 * r + s);
  const PipelineTiming timing = model.pipeline_timing(pipelines);

  const DataParallelChoice c =
      choose_data_parallel(workload.data_parallel, model.schedule(), timing, "x.syncEvery");
  ASSERT_TRUE(c.sync_every.has_value());
  ASSERT_TRUE(c.delta_bits.has_value());
  EXPECT_GT(timing.outer_sync.sync_every, kSyncEveryLadder[0]);
  EXPECT_EQ(c.mode.sync_every, timing.outer_sync.sync_every);
  EXPECT_EQ(c.sync_every->sync_every, timing.outer_sync.sync_every);
  EXPECT_EQ(c.mode.delta_bits, choose_delta_bits().bits);
  // Resolved: nothing is left to choose, and the reasons are the planner's (not "given").
  EXPECT_FALSE(c.mode.choose_sync_every);
  EXPECT_FALSE(c.mode.choose_delta_bits);
  EXPECT_EQ(c.sync_every_reason, sync_every_reason(*c.sync_every));
  EXPECT_EQ(c.delta_bits_reason, delta_bits_reason(*c.delta_bits));
  EXPECT_FALSE(c.sync_every_kept);
  EXPECT_TRUE(c.low_communication());
}

TEST(DataParallelChoice, GivenValuesSayWhereTheyCameFrom) {
  // Given values need no timing: nothing is chosen.
  const DataParallelChoice named = choose_data_parallel(
      given(20, 4), {}, {}, "spec.dataParallel.syncEvery", "spec.dataParallel.deltaBits");
  EXPECT_FALSE(named.sync_every.has_value());
  EXPECT_FALSE(named.delta_bits.has_value());
  EXPECT_EQ(named.mode, given(20, 4));
  EXPECT_EQ(named.sync_every_reason, "H=20: given (spec.dataParallel.syncEvery)");
  EXPECT_EQ(named.delta_bits_reason, "4-bit deltas: given (spec.dataParallel.deltaBits)");
  // With no field to name (tessel plan's flags or model file), just "given".
  const DataParallelChoice plain = choose_data_parallel(given(20, 32), {}, {});
  EXPECT_EQ(plain.sync_every_reason, "H=20: given");
  EXPECT_EQ(plain.delta_bits_reason, "32-bit deltas: given");
}

TEST(DataParallelChoice, SynchronousIsAsGivenWithNothingToSay) {
  DataParallelMode synchronous;
  synchronous.choose_sync_every = true;  // ignored: synchronous has no H
  const DataParallelChoice c = choose_data_parallel(synchronous, {}, {});
  EXPECT_FALSE(c.low_communication());
  EXPECT_FALSE(c.sync_every.has_value());
  EXPECT_FALSE(c.mode.choose_sync_every);
  EXPECT_TRUE(c.sync_every_reason.empty());
  EXPECT_TRUE(c.delta_bits_reason.empty());
}

TEST(DataParallelChoice, TheNameSaysHTheBitsAndAWaitedExchange) {
  EXPECT_EQ(data_parallel_name(DataParallelMode{}), "synchronous");
  EXPECT_EQ(data_parallel_name(given(50, 8)), "low-communication H=50 8-bit");
  DataParallelMode waited = given(10, 4);
  waited.delayed = false;
  EXPECT_EQ(data_parallel_name(waited), "low-communication H=10 4-bit blocking");
}

}  // namespace
}  // namespace tessel::placement
