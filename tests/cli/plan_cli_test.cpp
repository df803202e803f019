// What users type: the real `tessel` binary, its output and its errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct Outcome {
  int status = -1;
  std::string output;  // standard output and standard error together
};

Outcome tessel(const std::string& args) {
  const std::string cmd = std::string(TESSEL_BINARY) + " " + args + " 2>&1";
  Outcome r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

const std::string kTopologies = std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/";
const std::string kWorld =
    "--topology " + kTopologies + "5-worldwide-geo.yaml --stages 8 --replicas 8";

TEST(TesselPlan, PrintsAPlacementTable) {
  const Outcome r = tessel("plan " + kWorld + " --evaluations 300");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("stage"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("predicted iteration"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Oregon"), std::string::npos) << r.output;
}

TEST(TesselPlan, JsonCarriesTheContractAndTheSameSeedGivesTheSamePlacement) {
  const std::string args = "plan " + kWorld +
                           " --cost-model paper --c-dp-gb 0.65 --c-pp-gb 0.47125"
                           " --evaluations 400 --seed 9 --format json";
  const Outcome a = tessel(args + " --threads 1");
  const Outcome b = tessel(args + " --threads 2");
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  const auto ja = nlohmann::json::parse(a.output);
  const auto jb = nlohmann::json::parse(b.output);
  for (const char* key : {"predicted_iteration_s", "evaluations", "elapsed_s", "stages",
                          "pipelines", "rank_map", "layer_split", "convergence"})
    EXPECT_TRUE(ja.contains(key)) << key;
  EXPECT_EQ(ja["evaluations"], 400);
  EXPECT_EQ(ja["pipelines"], jb["pipelines"]);
  EXPECT_EQ(ja["cost"]["total_s"], jb["cost"]["total_s"]);
  EXPECT_NEAR(ja["cost"]["total_s"].get<double>(),
              ja["cost"]["data_parallel_s"].get<double>() + ja["cost"]["pipeline_s"].get<double>(),
              1e-9);
}

TEST(TesselPlan, WritesYamlToAFile) {
  const std::string out = ::testing::TempDir() + "/plan.yaml";
  const Outcome r = tessel("plan " + kWorld + " --strategy ordered --format yaml --output " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("rank_map:"), std::string::npos) << text;
}

TEST(TesselPlan, BadInputsFailNamingTheCulprit) {
  const std::string bad = ::testing::TempDir() + "/bad-topology.yaml";
  std::ofstream(bad) << "id: x\n"
                        "gpu_types: {V100: {peak_tflops_fp16_tensor: 125, memory_gib: 16}}\n"
                        "sites: [{name: a, kind: host, gpus: 1}]\n"
                        "devices: [{id: 0, site: a, gpu: V100, peak_tflops: 125}]\n"
                        "network: {intra_site: {latency_ms: 1, bandwidth_gbps: -2}}\n";
  Outcome r = tessel("plan --topology " + bad + " --stages 1 --replicas 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("bad-topology.yaml: network.intra_site.bandwidth_gbps: must be > 0"),
            std::string::npos)
      << r.output;

  r = tessel("plan --topology " + kTopologies + "5-worldwide-geo.yaml --stages 8 --replicas 4");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("64 devices"), std::string::npos) << r.output;

  r = tessel("plan " + kWorld + " --strategy genetic");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--strategy"), std::string::npos) << r.output;

  r = tessel("plan " + kWorld + " --preset gpt5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("gpt5"), std::string::npos) << r.output;

  r = tessel("plan " + kWorld + " --c-dp-gb 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--cost-model paper"), std::string::npos) << r.output;
}

TEST(TesselSimulate, ComparesTheSimulationWithTheClosedFormAndWritesATrace) {
  const std::string trace = ::testing::TempDir() + "/trace.json";
  const std::string svg = ::testing::TempDir() + "/timeline.svg";
  const Outcome r = tessel("simulate --topology " + kTopologies +
                           "4-regional-geo.yaml --stages 8 --replicas 8 --evaluations 200 "
                           "--trace " +
                           trace + " --svg " + svg);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("simulated"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("closed form"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tied token table: first and last stage sum it in"), std::string::npos)
      << r.output;
  std::ifstream in(trace);
  const auto j = nlohmann::json::parse(in);
  EXPECT_GT(j["traceEvents"].size(), 100u);
  std::ifstream picture(svg);
  const std::string text((std::istreambuf_iterator<char>(picture)),
                         std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<title>F mb0 c0</title>"), std::string::npos);
}

TEST(TesselSimulate, ReadsAPlacementFromPlan) {
  const std::string plan = ::testing::TempDir() + "/plan.json";
  const std::string topo =
      "--topology " + kTopologies + "3-multi-datacenter.yaml --stages 4 --replicas 16";
  ASSERT_EQ(tessel("plan " + topo + " --evaluations 200 --format json --output " + plan).status, 0);
  const Outcome r = tessel("simulate " + topo + " --schedule 1f1b --placement " + plan);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("iteration: simulated"), std::string::npos) << r.output;
  const Outcome wrong =
      tessel("simulate --topology " + kTopologies +
             "3-multi-datacenter.yaml --stages 8 --replicas 8 --placement " + plan);
  EXPECT_EQ(wrong.status, 1);
  EXPECT_NE(wrong.output.find("plan.json"), std::string::npos) << wrong.output;
}

TEST(TesselTopology, GeneratesAReproducibleTopologyThatPlans) {
  const std::string a = ::testing::TempDir() + "/gen-a.yaml";
  const std::string b = ::testing::TempDir() + "/gen-b.yaml";
  ASSERT_EQ(tessel("topology generate --devices 24 --sites 6 --seed 3 --output " + a).status, 0);
  ASSERT_EQ(tessel("topology generate --devices 24 --sites 6 --seed 3 --output " + b).status, 0);
  std::ifstream fa(a), fb(b);
  const std::string ta((std::istreambuf_iterator<char>(fa)), {});
  const std::string tb((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_EQ(ta, tb);
  const Outcome r = tessel("plan --topology " + a +
                           " --stages 3 --replicas 8 --preset gpt2-124m"
                           " --evaluations 200");
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace

namespace {

TEST(TesselSchedule, PrintsEveryRanksListChecksItAndDrawsIt) {
  const std::string svg = ::testing::TempDir() + "/tessel-schedule.svg";
  const Outcome r = tessel(
      "schedule --kind interleaved --stages 2 --micro-batches 4 --chunks 2 "
      "--svg " +
      svg);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rank 0: Forward mb0 c0; SendActivation mb0 c0 to 1;"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rank 1: RecvActivation mb0 c0 from 0;"), std::string::npos);
  // (p-1)/(v m + p-1) of the iteration is bubble: 1/9.
  EXPECT_NE(r.output.find("interleaved, p=2, m=4, v=2: replay clean (no deadlock, every send "
                          "received); iteration 135 ms, bubble 11.1%"),
            std::string::npos)
      << r.output;
  std::ifstream file(svg);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<title>B mb3 c1</title>"), std::string::npos);
}

TEST(TesselSchedule, AnImpossibleScheduleIsRefusedNamingTheValue) {
  const Outcome r = tessel("schedule --kind interleaved --stages 2 --micro-batches 3 --chunks 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("tessel: error: interleaved schedule (p=2, m=3, v=2): m mod G = 1"),
            std::string::npos)
      << r.output;
}

}  // namespace
