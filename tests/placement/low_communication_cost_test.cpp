// The low-communication mode in the cost model and the simulator (issue 15): per step the
// islands' (sites') own all-reduce, every H steps the delta exchange between them, amortised.
#include <gtest/gtest.h>

#include <string>

#include "placement/full_cost.h"
#include "placement/island_sync.h"
#include "placement/iteration_model.h"
#include "placement/outer_sync_cost.h"
#include "placement/ring_allreduce.h"
#include "placement/simulator.h"
#include "test_topologies.h"

namespace tessel::placement {
namespace {

// `sites` sites of `per_site` devices; the sites joined by `gbps` at `latency_ms`, inside a
// site 100 Gbit/s at 0.01 ms.
Topology sites_topology(int sites, int per_site, double gbps, double latency_ms) {
  std::string text =
      "format_version: 1\nid: t\nname: t\ngpu_types:\n"
      "  g: {peak_tflops_fp16_tensor: 100, peak_tflops_fp32: 20, memory_gib: 80}\nsites:\n";
  for (int s = 0; s < sites; ++s)
    text += "  - {name: s" + std::to_string(s) + ", kind: lab, gpus: " + std::to_string(per_site) +
            "}\n";
  text += "devices:\n";
  for (int d = 0; d < sites * per_site; ++d)
    text += "  - {id: " + std::to_string(d) + ", site: s" + std::to_string(d / per_site) +
            ", gpu: g}\n";
  text +=
      "network:\n  symmetric: true\n  intra_site: {latency_ms: 0.01, bandwidth_gbps: 100}\n"
      "  inter_site_default: {latency_ms: " +
      std::to_string(latency_ms) + ", bandwidth_gbps: " + std::to_string(gbps) + "}\n";
  return parse_topology_yaml(text, "sites.yaml");
}

Workload small_model() {
  Workload w = workload_preset("gpt2-124m");
  w.global_batch = 16;
  return w;
}

Workload with_mode(Workload w, int h, int bits, bool delayed = true) {
  w.data_parallel = {DataParallelKind::LowCommunication, h, bits, delayed};
  return w;
}

TEST(DeltaEncoding, BytesAreTheCodecsWords) {
  EXPECT_EQ(delta_encoding_bytes(1000, 32), 4000.0);
  EXPECT_EQ(delta_encoding_bytes(1000, 8), 1000.0 + 4 * 8);  // 8 blocks of 128: 8 scales
  EXPECT_EQ(delta_encoding_bytes(1000, 4), 500.0 + 4 * 8);
  EXPECT_EQ(delta_encoding_bytes(1001, 4), 4.0 * ((501 + 32 + 3) / 4));  // padded to 4 bytes
  EXPECT_THROW(delta_encoding_bytes(10, 16), std::invalid_argument);
}

TEST(LowCommunicationCost, SynchronousTimingHasNoOuterSyncAndTheRingOverTheWholeGroup) {
  const Topology t = sites_topology(2, 2, 1.0, 20);
  const Workload w = small_model();
  const FullCostModel model(t, {1, 4}, w, {});
  const PipelineTiming timing = model.pipeline_timing({{0}, {1}, {2}, {3}});
  EXPECT_EQ(timing.outer_sync.sync_every, 0);
  EXPECT_EQ(timing.stages[0].delta_exchange_s, 0.0);
  // The whole group's ring (across the sites), and the world's sum over every device.
  const RingPlan ring = plan_ring(t, {0, 1, 2, 3}, w.paper_c_dp_gb(1) * 1e9);
  EXPECT_EQ(timing.stages[0].allreduce_s, ring_allreduce_s(ring, w.gradient_bytes(12, true, true)));
  EXPECT_EQ(timing.world_sync_s, 0.020);
  const SimulationResult sim = simulate_iteration(model.schedule(), timing);
  EXPECT_EQ(sim.iteration_s, sim.step_s);
  EXPECT_EQ(sim.outer_stall_s, 0.0);
  EXPECT_EQ(amortised_iteration_s(timing, 1.25), 1.25);
}

TEST(LowCommunicationCost, IslandsAllReduceInsideTheirSiteAndExchangeDeltasAcross) {
  const Topology t = sites_topology(2, 2, 1.0, 20);
  const Workload w = with_mode(small_model(), 10, 8);
  const FullCostModel model(t, {1, 4}, w, {});
  const PipelineTiming timing = model.pipeline_timing({{0}, {1}, {2}, {3}});
  const double grad = w.gradient_bytes(12, true, true);
  // Each site's pair all-reduces over its 100 Gbit/s link: 2 steps of lat + grad/2/bw.
  EXPECT_NEAR(timing.stages[0].allreduce_s, 2 * (0.01e-3 + grad / 2 * 8 / 100e9), 1e-12);
  // Member p of one site sends to member p of the other: one encoding each, in parallel.
  const double encoding = delta_encoding_bytes(w.stage_parameters(12, true, true), 8);
  EXPECT_NEAR(timing.stages[0].delta_exchange_s, 0.020 + encoding * 8 / 1e9, 1e-12);
  EXPECT_EQ(timing.outer_sync.sync_every, 10);
  EXPECT_EQ(timing.world_sync_s, 0.01e-3);     // the step's sums stay inside the sites
  EXPECT_EQ(timing.outer_sync.vote_s, 0.020);  // the vote goes round every rank
}

TEST(LowCommunicationCost, AnIslandOfOneSendsToEveryMemberOfTheOthersInTurn) {
  // Sites of 1 and 3 devices in one stage group: the lone member sends three encodings.
  const Topology t = sites_topology(4, 1, 2.0, 10);
  const auto islands = site_islands(t, {0, 1, 2, 3});
  ASSERT_EQ(islands.size(), 4u);
  EXPECT_NEAR(delta_exchange_s(t, islands, 1e6), 0.010 + 3 * 1e6 * 8 / 2e9, 1e-12);
  EXPECT_EQ(delta_exchange_bytes(islands, 1e6), 3e6);
  EXPECT_EQ(delta_exchange_s(t, {{0, 1, 2, 3}}, 1e6), 0.0);
}

// Two sites of one device each: synchronous data parallelism all-reduces the gradients over the
// slow link every step; the mode sends one encoding every H steps. With negligible latency the
// communication per step falls by H x 32/bits (less the 8- and 4-bit scales: 3% and 6%).
TEST(LowCommunicationCost, CommunicationPerStepFallsByHTimes32OverBits) {
  const Topology t = sites_topology(2, 1, 1.0, 1e-6);
  const Workload w = small_model();
  const std::vector<std::vector<int>> pipelines = {{0}, {1}};
  const FullCostModel synchronous(t, {1, 2}, w, {});
  const PipelineTiming base = synchronous.pipeline_timing(pipelines);
  const double base_comm = data_parallel_comm_per_step_s(base);
  const double base_bytes = data_parallel_bytes_per_step(t, w, {{0, 1}}, {12}, 0);
  for (int h : {1, 10, 100}) {
    for (int bits : {32, 8, 4}) {
      const Workload m = with_mode(w, h, bits);
      const FullCostModel mode(t, {1, 2}, m, {});
      const double comm = data_parallel_comm_per_step_s(mode.pipeline_timing(pipelines));
      const double bytes = data_parallel_bytes_per_step(t, m, {{0, 1}}, {12}, h);
      const double ideal = h * 32.0 / bits;
      SCOPED_TRACE("H=" + std::to_string(h) + " bits=" + std::to_string(bits));
      EXPECT_GT(base_comm / comm, 0.93 * ideal);
      EXPECT_LE(base_comm / comm, 1.0001 * ideal);
      EXPECT_GT(base_bytes / bytes, 0.93 * ideal);
      EXPECT_LE(base_bytes / bytes, 1.0001 * ideal);
    }
  }
}

TEST(LowCommunicationCost, DelayedExchangeStallsOnlyByWhatExceedsOneStep) {
  const Topology t = sites_topology(2, 1, 0.05, 50);
  const std::vector<std::vector<int>> pipelines = {{0}, {1}};
  const Workload delayed = with_mode(small_model(), 10, 8, true);
  const Workload blocking = with_mode(small_model(), 10, 8, false);
  const FullCostModel a(t, {1, 2}, delayed, {});
  const FullCostModel b(t, {1, 2}, blocking, {});
  const PipelineTiming ta = a.pipeline_timing(pipelines);
  const PipelineTiming tb = b.pipeline_timing(pipelines);
  const SimulationResult sa = simulate_iteration(a.schedule(), ta);
  const SimulationResult sb = simulate_iteration(b.schedule(), tb);
  const double exchange = ta.stages[0].delta_exchange_s;
  ASSERT_GT(exchange, 0);
  EXPECT_DOUBLE_EQ(sa.step_s, sb.step_s);  // the inner step is the same
  EXPECT_NEAR(sa.outer_stall_s, std::max(0.0, exchange - sa.step_s) + ta.outer_sync.outer_step_s,
              1e-12);
  EXPECT_NEAR(sb.outer_stall_s, exchange + tb.outer_sync.outer_step_s, 1e-12);
  EXPECT_NEAR(sa.iteration_s, sa.step_s + sa.outer_stall_s / 10, 1e-12);
  EXPECT_LT(sa.iteration_s, sb.iteration_s);
  // The closed form amortises the same way.
  EXPECT_NEAR(predict_iteration_s(a.schedule(), ta), sa.iteration_s, 0.02 * sa.iteration_s);
  EXPECT_NEAR(predict_iteration_s(b.schedule(), tb), sb.iteration_s, 0.02 * sb.iteration_s);
  // The simulator shows one sync's exchange from the end of each rank's step.
  bool shown = false;
  for (const TimedEvent& e : sa.events)
    if (e.name.rfind("outer sync", 0) == 0) shown = e.duration_s == exchange;
  EXPECT_TRUE(shown);
}

TEST(LowCommunicationCost, TheSearchSpreadsDataParallelGroupsAcrossSitesInTheMode) {
  // Scenario 5, GPT3-1.3B: synchronous, the site-per-group layout is cheaper (gradients stay on
  // fast links); in the mode with H = 50 the layout with pipelines inside sites wins.
  const Topology t = testing::scenario("5-worldwide-geo.yaml");
  const FullCostModel synchronous(t, {8, 8}, workload_preset("gpt3-1.3b"), {});
  const FullCostModel mode(t, {8, 8}, with_mode(workload_preset("gpt3-1.3b"), 50, 8), {});
  auto s1 = synchronous.make_scratch();
  auto s2 = mode.make_scratch();
  const Groups inside = testing::one_site_per_group();
  const Groups across = testing::one_device_per_site_groups();
  EXPECT_LT(synchronous.cost(inside, *s1), synchronous.cost(across, *s1));
  EXPECT_LT(mode.cost(across, *s2), mode.cost(inside, *s2));
  EXPECT_LT(mode.cost(across, *s2), synchronous.cost(inside, *s1));
}

TEST(LowCommunicationWorkload, TheYamlSectionRoundTripsAndNamesBadFields) {
  const std::string base = "preset: gpt2-124m\n";
  const Workload w = parse_workload_yaml(
      base +
          "data_parallel: {mode: low-communication, sync_every: 20, delta_bits: 4, "
          "delayed: false}\n",
      "w.yaml");
  EXPECT_EQ(w.data_parallel, (DataParallelMode{DataParallelKind::LowCommunication, 20, 4, false}));
  EXPECT_EQ(parse_workload_yaml(workload_to_yaml(w), "again.yaml").data_parallel, w.data_parallel);
  EXPECT_FALSE(parse_workload_yaml(base, "w.yaml").data_parallel.low_communication());
  EXPECT_EQ(workload_to_yaml(parse_workload_yaml(base, "w.yaml")).find("data_parallel"),
            std::string::npos);
  auto error = [&](const std::string& section) {
    try {
      parse_workload_yaml(base + section, "w.yaml");
    } catch (const WorkloadError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("data_parallel: {mode: low-communication, delta_bits: 16}\n"),
            "w.yaml: data_parallel.delta_bits: must be 32, 8 or 4, got 16");
  EXPECT_EQ(error("data_parallel: {mode: low-communication, sync_every: 0}\n"),
            "w.yaml: data_parallel.sync_every: must be in [1, 10000], got 0");
  EXPECT_EQ(error("data_parallel: {mode: diloco}\n"),
            "w.yaml: data_parallel.mode: must be \"synchronous\" or \"low-communication\", got "
            "\"diloco\"");
  EXPECT_EQ(error("data_parallel: {mode: synchronous, sync_every: 5}\n"),
            "w.yaml: data_parallel: sync_every, delta_bits, delayed and sync_overhead apply to "
            "low-communication only");
  EXPECT_EQ(error("data_parallel: {sync_every: 5}\n"),
            "w.yaml: data_parallel.mode: missing (synchronous or low-communication)");
  EXPECT_EQ(error("data_parallel: {mode: low-communication, outer: 1}\n"),
            "w.yaml: data_parallel.outer: unknown field");
}

}  // namespace
}  // namespace tessel::placement
