// The network and plan of a local job: the topology is generated or loaded with one device per
// process and its links scaled, every device becomes this machine's measured process, and a
// given placement is checked against the job before it is used.
#include "noderuntime/launcher/local_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "noderuntime/launcher/local_topology.h"
#include "placement/full_cost.h"
#include "placement/simulator.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

class LocalPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel-local-plan-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "corpus.txt") << "abc";
  }
  void TearDown() override { fs::remove_all(dir_); }

  LocalJob job(const std::string& topology, const std::string& schedule = "{kind: 1f1b}",
               int layers = 4) const {
    return parse_local_job("topology: " + topology + "\nmodel: {layers: " + std::to_string(layers) +
                               ", hidden: 32, heads: 4, seq_len: 16}\n"
                               "training: {steps: 1, micro_batch: 1, global_batch: 8}\n"
                               "data: {text: corpus.txt}\nschedule: " +
                               schedule + "\npipeline: {stages: 2, replicas: 2}\n",
                           "job.yaml", dir_.string());
  }

  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }

  static ComputeSpeed speed() {
    ComputeSpeed s;
    s.flops_per_s = 4e9;
    s.cores = 2;
    s.share = 0.5;
    return s;
  }

  fs::path dir_;
};

TEST_F(LocalPlanTest, GeneratedTopologyHasOneDevicePerProcessAndScaledLinks) {
  const LocalJob plain = job("{generate: {sites: 2, seed: 5}}");
  const LocalJob scaled =
      job("{generate: {sites: 2, seed: 5}, bandwidth_scale: 0.5, latency_scale: 0.1}");
  const placement::Topology a = job_topology(plain);
  const placement::Topology b = job_topology(scaled);
  ASSERT_EQ(a.size(), 4);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      if (i == j) continue;
      EXPECT_DOUBLE_EQ(b.bandwidth_gbps(i, j), 0.5 * a.bandwidth_gbps(i, j));
      EXPECT_NEAR(b.latency_ms(i, j), 0.1 * a.latency_ms(i, j), 1e-12);
    }
  }
}

TEST_F(LocalPlanTest, TopologyFileMustHaveOneDevicePerProcess) {
  const std::string path = write("three.yaml",
                                 "format_version: 1\nid: three\nname: three\n"
                                 "gpu_types: {g: {peak_tflops_fp16_tensor: 1, memory_gib: 8}}\n"
                                 "sites: [{name: a}]\n"
                                 "devices: [{id: 0, site: a, gpu: g}, {id: 1, site: a, gpu: g},"
                                 " {id: 2, site: a, gpu: g}]\n"
                                 "network: {intra_site: {latency_ms: 1, bandwidth_gbps: 1}}\n");
  try {
    job_topology(job("{file: three.yaml}"));
    FAIL() << "no error";
  } catch (const LocalJobError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": has 3 devices, but the job's pipeline.stages x "
                                                "pipeline.replicas is 2 x 2 = 4"),
              std::string::npos)
        << e.what();
  }
  try {
    job_topology(job("{file: absent.yaml}"));
    FAIL() << "no error";
  } catch (const LocalJobError& e) {
    EXPECT_NE(std::string(e.what()).find("job.yaml: topology.file: "), std::string::npos)
        << e.what();
  }
}

TEST_F(LocalPlanTest, LocalizedDevicesComputeAtTheMeasuredSpeed) {
  const placement::Topology original = job_topology(job("{generate: {sites: 2}}"));
  const placement::Topology local = localize_topology(original, speed(), 4);
  ASSERT_EQ(local.gpu_types.size(), 1u);
  const placement::FullCostOptions defaults;
  EXPECT_DOUBLE_EQ(local.gpu_types[0].peak_tflops_fp32 * 1e12 * defaults.utilisation, 2e9);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(local.devices[i].gpu, "local-cpu");
    EXPECT_EQ(local.devices[i].site, original.devices[i].site);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(local.latency_ms(i, j), original.latency_ms(i, j));
  }
}

TEST_F(LocalPlanTest, PlanPredictsWithTheSimulator) {
  const LocalJob j = job("{generate: {sites: 2}}");
  const LocalPlan plan = plan_local_job(j, job_topology(j), speed(), "");
  EXPECT_EQ(plan.placement.shape.stages, 2);
  EXPECT_EQ(std::accumulate(plan.layer_split.begin(), plan.layer_split.end(), 0), 4);
  EXPECT_EQ(plan.layer_split, plan.stage_layers);
  EXPECT_GT(plan.simulation.iteration_s, 0);
  EXPECT_EQ(plan.simulation.iteration_s,
            placement::simulate_iteration(plan.spec, plan.timing).iteration_s);
  std::vector<int> devices = plan.device_of_rank;
  std::sort(devices.begin(), devices.end());
  EXPECT_EQ(devices, (std::vector<int>{0, 1, 2, 3}));
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(plan.device_of_rank[rank], plan.placement.pipelines[rank / 2][rank % 2]);
  }
}

// Processes that mostly wait for a slow network leave their cores to the others; the share
// settles where the simulated iteration, run at that share, gives it back: the mean over the
// compute of cores / (processes computing at that moment).
TEST_F(LocalPlanTest, CoresShareSettlesForThePlacement) {
  for (const char* network : {"{generate: {sites: 2}, bandwidth_scale: 0.001}",
                              "{generate: {sites: 2}, bandwidth_scale: 1000, latency_scale: 0}"}) {
    const LocalJob j = job(network);
    const LocalPlan plan = plan_local_job(j, job_topology(j), speed(), "");
    std::vector<std::pair<double, int>> edges;
    for (const placement::TimedEvent& e : plan.simulation.events) {
      if (e.stream == placement::Stream::ForwardCompute ||
          e.stream == placement::Stream::BackwardCompute ||
          e.stream == placement::Stream::OptimizerStep) {
        edges.emplace_back(e.start_s, 1);
        edges.emplace_back(e.start_s + e.duration_s, -1);
      }
    }
    std::sort(edges.begin(), edges.end());
    double work = 0, shared = 0;
    int active = 0;
    for (size_t i = 0; i + 1 < edges.size(); ++i) {
      active += edges[i].second;
      const double length = edges[i + 1].first - edges[i].first;
      work += length * active;
      if (active > 0) shared += length * active * std::min(1.0, 2.0 / (2 * active));
    }
    EXPECT_GE(plan.speed.share, speed().share) << network;
    EXPECT_LE(plan.speed.share, 1.0) << network;
    EXPECT_NEAR(plan.speed.share, shared / work, 0.03 * plan.speed.share) << network;
    const placement::FullCostOptions defaults;
    EXPECT_DOUBLE_EQ(plan.topology.gpu_types[0].peak_tflops_fp32 * 1e12 * defaults.utilisation,
                     plan.speed.effective_flops_per_s());
  }
}

TEST_F(LocalPlanTest, InterleavedSplitGivesEveryChunkItsShare) {
  const LocalJob j = job("{generate: {sites: 2}}", "{kind: interleaved, chunks: 2}", 8);
  const LocalPlan plan = plan_local_job(j, job_topology(j), speed(), "");
  ASSERT_EQ(plan.layer_split.size(), 4u);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(plan.layer_split[s] + plan.layer_split[2 + s], plan.stage_layers[s]);
    EXPECT_GE(plan.layer_split[2 + s], 1);
  }
}

TEST_F(LocalPlanTest, GivenPlacementIsUsedAndChecked) {
  const LocalJob j = job("{generate: {sites: 2}}");
  const placement::Topology network = job_topology(j);
  LocalPlan planned = plan_local_job(j, network, speed(), "");
  nlohmann::json placement = placement::placement_to_json(planned.placement);
  placement["pipelines"] = {{{"replica", 0}, {"devices", {3, 2}}},
                            {{"replica", 1}, {"devices", {1, 0}}}};
  // The views of the same placement must agree with the pipelines (placement::check_placement).
  const nlohmann::json pipelines_only = placement;
  placement["stages"][0]["devices"] = {3, 1};
  placement["stages"][1]["devices"] = {2, 0};
  placement["stages"][0]["dp_ring"] = {3, 1};
  placement["stages"][1]["dp_ring"] = {2, 0};
  placement["rank_map"] = {{{"rank", 0}, {"replica", 0}, {"stage", 0}, {"device", 3}},
                           {{"rank", 1}, {"replica", 0}, {"stage", 1}, {"device", 2}},
                           {{"rank", 2}, {"replica", 1}, {"stage", 0}, {"device", 1}},
                           {{"rank", 3}, {"replica", 1}, {"stage", 1}, {"device", 0}}};
  const std::string good = write("good.json", placement.dump());
  const LocalPlan given = plan_local_job(j, network, speed(), good);
  EXPECT_EQ(given.device_of_rank, (std::vector<int>{3, 2, 1, 0}));

  auto error_for = [&](nlohmann::json changed) -> std::string {
    const std::string path = write("bad.json", changed.dump());
    try {
      plan_local_job(j, network, speed(), path);
    } catch (const LocalJobError& e) {
      return e.what();
    }
    return "";
  };
  nlohmann::json other_topology = placement;
  other_topology["topology"] = "elsewhere";
  EXPECT_NE(error_for(other_topology).find("bad.json: topology: planned for 'elsewhere'"),
            std::string::npos);
  nlohmann::json twice = placement;
  twice["pipelines"][1]["devices"] = {3, 0};
  EXPECT_NE(error_for(twice).find("bad.json: pipelines[1].devices[0]: device 3 is used twice "
                                  "(also at pipelines[0].devices[0])"),
            std::string::npos);
  nlohmann::json outside = placement;
  outside["pipelines"][1]["devices"] = {1, 9};
  EXPECT_NE(error_for(outside).find("device 9 is not in the topology"), std::string::npos);
  nlohmann::json shape = placement;
  shape["replicas"] = 4;
  EXPECT_NE(error_for(shape).find("bad.json: stages_count, replicas: the placement is 2 x 4"),
            std::string::npos);
  EXPECT_NE(error_for(nlohmann::json{{"format_version", 1}}).find("bad.json: topology: missing"),
            std::string::npos);
  EXPECT_NE(error_for(nlohmann::json::array()).find("bad.json: not a placement"),
            std::string::npos);
  const std::string disagree = error_for(pipelines_only);
  EXPECT_NE(disagree.find("bad.json: stages["), std::string::npos) << disagree;
  EXPECT_NE(disagree.find("(the two views must agree)"), std::string::npos) << disagree;
}

}  // namespace
}  // namespace tessel::launcher
