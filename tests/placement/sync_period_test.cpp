// The planner's choice of the low-communication mode's sync period H and delta precision
// (placement/sync_period.h, issue 15): the smallest H of the ladder whose amortised outer sync
// adds at most the tolerance to the inner step, chosen per layout by the cost model.
#include "placement/sync_period.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "placement/full_cost.h"
#include "placement/iteration_model.h"
#include "placement/outer_sync_cost.h"
#include "placement/workload.h"
#include "test_topologies.h"

namespace tessel::placement {
namespace {

TEST(SyncPeriodChoice, TakesTheSmallestLadderValueWithinTheTolerance) {
  // 22 s of stall against a 10 s step at 5%: at most 0.5 s a step, so H >= 44: 50 (20 gives 1.1).
  const SyncPeriodChoice c = choose_sync_every(10.0, 22.0, 0.05);
  EXPECT_EQ(c.sync_every, 50);
  EXPECT_EQ(c.smaller, 20);
  EXPECT_TRUE(c.within);
  EXPECT_EQ(c.step_s, 10.0);
  EXPECT_EQ(c.stall_s, 22.0);
  // On the bound exactly: within (5 s / 10 = 0.5 s = 5% of 10 s).
  EXPECT_EQ(choose_sync_every(10.0, 5.0, 0.05).sync_every, 10);
  EXPECT_EQ(choose_sync_every(10.0, 5.0, 0.05).smaller, 5);
  // A looser tolerance, a smaller H.
  EXPECT_EQ(choose_sync_every(10.0, 22.0, 0.2).sync_every, 20);
  // No stall: the smallest of the ladder, with nothing below it.
  const SyncPeriodChoice none = choose_sync_every(10.0, 0.0, 0.05);
  EXPECT_EQ(none.sync_every, kSyncEveryLadder[0]);
  EXPECT_EQ(none.smaller, 0);
  EXPECT_TRUE(none.within);
}

TEST(SyncPeriodChoice, TakesTheLargestAndSaysSoWhenNothingIsWithin) {
  const SyncPeriodChoice c = choose_sync_every(1.0, 1000.0, 0.05);
  EXPECT_EQ(c.sync_every, 1000);
  EXPECT_FALSE(c.within);
  EXPECT_NE(sync_every_reason(c).find("H=1000: the largest H considered; even it adds more than "
                                      "5% to the inner step"),
            std::string::npos)
      << sync_every_reason(c);
}

TEST(SyncPeriodChoice, TheReasonGivesTheStallAndTheNextSmallerH) {
  const std::string why = sync_every_reason(choose_sync_every(10.0, 22.0, 0.05));
  EXPECT_EQ(why,
            "H=50: the smallest H whose outer sync adds at most 5% to the inner step (stall 22 s "
            "per sync / 50 = 0.44 s a step, 4.4% of the 10 s inner step; H=20: 1.1 s, 11%)");
}

TEST(SyncPeriodChoice, RefusesNonsense) {
  EXPECT_THROW(choose_sync_every(-1.0, 1.0, 0.05), std::invalid_argument);
  EXPECT_THROW(choose_sync_every(1.0, -1.0, 0.05), std::invalid_argument);
  EXPECT_THROW(choose_sync_every(1.0, 1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(choose_sync_every(1.0, std::nan(""), 0.05), std::invalid_argument);
  PipelineTiming synchronous;
  synchronous.stages.resize(1);
  EXPECT_THROW(choose_sync_every(ScheduleSpec{}, synchronous, 0.05), std::invalid_argument);
}

TEST(DeltaBitsChoice, IsTheMeasuredEightBits) {
  const DeltaBitsChoice c = choose_delta_bits();
  EXPECT_EQ(c.bits, 8);
  EXPECT_LE(c.loss_cost, kDeltaBitsLossTolerance);
  EXPECT_NE(delta_bits_reason(c).find("4-bit: +4.97% at worst"), std::string::npos)
      << delta_bits_reason(c);
  const DataParallelMode chosen = low_communication_chosen();
  EXPECT_TRUE(chosen.low_communication());
  EXPECT_TRUE(chosen.choose_sync_every);
  EXPECT_TRUE(chosen.choose_delta_bits);
  EXPECT_EQ(chosen.delta_bits, 8);
  EXPECT_EQ(chosen.sync_overhead, kDefaultSyncOverhead);
}

// The worldwide scenario with GPT3-1.3B shapes, 8 stages x 8 replicas.
struct Worldwide {
  Topology topology = testing::scenario("5-worldwide-geo.yaml");
  Workload workload(const DataParallelMode& mode) const {
    Workload w = workload_preset("gpt3-1.3b");
    w.data_parallel = mode;
    return w;
  }
  FullCostModel model(const DataParallelMode& mode) const {
    return FullCostModel(topology, {8, 8}, workload(mode), {});
  }
};

DataParallelMode fixed(int h) {
  DataParallelMode m = low_communication_chosen();
  m.choose_sync_every = false;
  m.sync_every = h;
  return m;
}

// Each pipeline inside one site (replica r = site r's devices): every stage group spans the
// eight sites, so every sync crosses the world.
std::vector<std::vector<int>> pipelines_inside_sites() {
  std::vector<std::vector<int>> pipelines(8);
  for (int r = 0; r < 8; ++r)
    for (int s = 0; s < 8; ++s) pipelines[r].push_back(8 * r + s);
  return pipelines;
}

// Each stage group inside one site (stage s = site s's devices): nothing crosses between syncs.
std::vector<std::vector<int>> stage_groups_inside_sites() {
  std::vector<std::vector<int>> pipelines(8);
  for (int r = 0; r < 8; ++r)
    for (int s = 0; s < 8; ++s) pipelines[r].push_back(8 * s + r);
  return pipelines;
}

TEST(SyncPeriodInTheCostModel, ChoosesHPerLayoutWithinTheToleranceAndNotBelow) {
  const Worldwide world;
  const FullCostModel chosen = world.model(low_communication_chosen());
  const PipelineTiming timing = chosen.pipeline_timing(pipelines_inside_sites());
  const int h = timing.outer_sync.sync_every;
  const double step = predict_inner_step_s(chosen.schedule(), timing);
  const double stall = outer_sync_stall_s(timing, step);
  ASSERT_GT(stall, 0.0);
  EXPECT_LE(stall / h, kDefaultSyncOverhead * step);
  // The ladder's value below it is over the tolerance.
  const auto* at = std::find(std::begin(kSyncEveryLadder), std::end(kSyncEveryLadder), h);
  ASSERT_NE(at, std::end(kSyncEveryLadder));
  ASSERT_NE(at, std::begin(kSyncEveryLadder)) << "H=" << h << ": nothing to hide?";
  EXPECT_GT(stall / *(at - 1), kDefaultSyncOverhead * step);
  // The model prices the layout exactly as at that H given.
  const FullCostModel given = world.model(fixed(h));
  const PipelineTiming at_h = given.pipeline_timing(pipelines_inside_sites());
  EXPECT_EQ(predict_iteration_s(chosen.schedule(), timing),
            predict_iteration_s(given.schedule(), at_h));
  const Groups groups = testing::one_device_per_site_groups();
  EXPECT_EQ(chosen.evaluate(groups).cost.total_s, given.evaluate(groups).cost.total_s);
  EXPECT_EQ(chosen.evaluate(groups).cost.data_parallel_s,
            given.evaluate(groups).cost.data_parallel_s);

  // The same model on a layout whose stage groups stay inside the sites: the outer sync has
  // nothing to send across, so the smallest H.
  EXPECT_EQ(chosen.pipeline_timing(stage_groups_inside_sites()).outer_sync.sync_every,
            kSyncEveryLadder[0]);
}

TEST(SyncPeriodInTheCostModel, AWaitedExchangeOrATighterToleranceTakesALargerH) {
  const Worldwide world;
  auto chosen_h = [&](bool delayed, double overhead) {
    DataParallelMode m = low_communication_chosen();
    m.delayed = delayed;
    m.sync_overhead = overhead;
    return world.model(m).pipeline_timing(pipelines_inside_sites()).outer_sync.sync_every;
  };
  EXPECT_GE(chosen_h(false, 0.05), chosen_h(true, 0.05));
  EXPECT_GE(chosen_h(true, 0.01), chosen_h(true, 0.05));
  EXPECT_LE(chosen_h(true, 0.5), chosen_h(true, 0.05));
  EXPECT_LT(chosen_h(true, 0.5), chosen_h(true, 0.01));
}

TEST(SyncPeriodWorkload, TheYamlSectionTakesAutoAndTheTolerance) {
  const std::string base = "preset: gpt2-124m\n";
  auto parse = [&](const std::string& section) {
    return parse_workload_yaml(base + section, "w.yaml").data_parallel;
  };
  // Absent and auto are the planner's choice; the bits chosen are 8.
  for (const std::string& section :
       {std::string("data_parallel: {mode: low-communication}\n"),
        std::string("data_parallel: {mode: low-communication, sync_every: auto, delta_bits: "
                    "auto}\n")}) {
    const DataParallelMode m = parse(section);
    EXPECT_EQ(m, low_communication_chosen()) << section;
  }
  const DataParallelMode tolerant =
      parse("data_parallel: {mode: low-communication, sync_every: auto, sync_overhead: 0.2}\n");
  EXPECT_TRUE(tolerant.choose_sync_every);
  EXPECT_EQ(tolerant.sync_overhead, 0.2);
  const DataParallelMode given =
      parse("data_parallel: {mode: low-communication, sync_every: 20, delta_bits: 4}\n");
  EXPECT_FALSE(given.choose_sync_every);
  EXPECT_FALSE(given.choose_delta_bits);
  EXPECT_EQ(given.sync_every, 20);
  EXPECT_EQ(given.delta_bits, 4);
  // Round trip: auto is written as auto, with its tolerance.
  Workload w = workload_preset("gpt2-124m");
  w.data_parallel = tolerant;
  const std::string yaml = workload_to_yaml(w);
  EXPECT_NE(yaml.find("sync_every: auto\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("sync_overhead: 0.2\n"), std::string::npos) << yaml;
  EXPECT_EQ(parse_workload_yaml(yaml, "again.yaml").data_parallel, tolerant);
}

TEST(SyncPeriodWorkload, BadValuesAreRefusedNamingTheField) {
  auto error = [](const std::string& section) {
    try {
      parse_workload_yaml("preset: gpt2-124m\n" + section, "w.yaml");
    } catch (const WorkloadError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("data_parallel: {mode: low-communication, sync_every: often}\n"),
            "w.yaml: data_parallel.sync_every: expected an integer or auto, got 'often'");
  EXPECT_EQ(error("data_parallel: {mode: low-communication, delta_bits: some}\n"),
            "w.yaml: data_parallel.delta_bits: expected an integer or auto, got 'some'");
  EXPECT_EQ(error("data_parallel: {mode: low-communication, sync_overhead: 0}\n"),
            "w.yaml: data_parallel.sync_overhead: must be in (0, 1] (a fraction of the inner "
            "step), got 0");
  EXPECT_EQ(error("data_parallel: {mode: low-communication, sync_overhead: 1.5}\n"),
            "w.yaml: data_parallel.sync_overhead: must be in (0, 1] (a fraction of the inner "
            "step), got 1.5");
  EXPECT_EQ(error("data_parallel: {mode: low-communication, sync_overhead: .nan}\n"),
            "w.yaml: data_parallel.sync_overhead: must be in (0, 1] (a fraction of the inner "
            "step), got nan");
  EXPECT_EQ(error("data_parallel: {mode: low-communication, sync_overhead: lots}\n"),
            "w.yaml: data_parallel.sync_overhead: expected a number, got 'lots'");
  EXPECT_EQ(error("data_parallel: {mode: low-communication, sync_every: 20, sync_overhead: 0.1}\n"),
            "w.yaml: data_parallel.sync_overhead: applies only when sync_every is auto");
}

}  // namespace
}  // namespace tessel::placement
