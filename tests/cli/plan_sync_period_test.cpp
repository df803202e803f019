// `tessel plan` and `tessel simulate` choosing the low-communication mode's sync period H and
// delta bits (issue 15, placement/sync_period.h): the smallest H of 1, 2, 5, ..., 1000 whose
// amortised outer sync adds at most --sync-overhead (5%) to the inner step, and why.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessel_run.h"

namespace {

using tessel::cli_testing::run_tessel;
using tessel::cli_testing::TesselRun;

const std::string kWorld =
    std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/5-worldwide-geo.yaml";
const std::vector<int> kLadder = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};

TesselRun tessel(std::vector<std::string> args) {
  return run_tessel(args, {.dir = "", .timeout_s = 120, .fsize_limit = 0, .on_stderr = nullptr});
}

int exit_code(const TesselRun& r) {
  return WIFEXITED(r.raw_status) ? WEXITSTATUS(r.raw_status) : -1;
}

// tessel plan on the worldwide scenario, GPT3-1.3B, 8 x 8, in the mode, then `extra`.
std::vector<std::string> world_plan(std::vector<std::string> extra) {
  std::vector<std::string> args = {"plan", "--topology", kWorld, "--stages",
                                   "8",    "--replicas", "8"};
  for (const char* a : {"--preset", "gpt3-1.3b", "--evaluations", "2000"}) args.push_back(a);
  for (const char* a : {"--data-parallel", "low-communication"}) args.push_back(a);
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The plan's data_parallel section: H within the tolerance, the ladder's value below it not.
void expect_smallest_within(const nlohmann::json& dp, double overhead) {
  ASSERT_TRUE(dp.is_object());
  const int h = dp.at("sync_every").get<int>();
  const double step = dp.at("inner_step_s").get<double>();
  const double stall = dp.at("stall_per_sync_s").get<double>();
  EXPECT_TRUE(dp.at("sync_every_chosen").get<bool>());
  EXPECT_EQ(dp.at("sync_overhead").get<double>(), overhead);
  EXPECT_GT(stall, 0.0) << dp.dump();
  EXPECT_LE(stall / h, overhead * step) << dp.dump();
  const auto at = std::find(kLadder.begin(), kLadder.end(), h);
  ASSERT_NE(at, kLadder.end()) << dp.dump();
  ASSERT_NE(at, kLadder.begin()) << dp.dump();
  EXPECT_GT(stall / *(at - 1), overhead * step) << dp.dump();
}

TEST(TesselPlanSyncPeriod, OnTheWorldwideScenarioAutoTakesTheSmallestHWithinFivePercent) {
  const TesselRun r = tessel(world_plan({"--format", "json"}));
  ASSERT_EQ(exit_code(r), 0) << r.shown();
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  const nlohmann::json& dp = plan.at("data_parallel");
  expect_smallest_within(dp, 0.05);
  EXPECT_EQ(dp.at("mode"), "low-communication");
  EXPECT_EQ(dp.at("delta_bits"), 8);
  EXPECT_TRUE(dp.at("delta_bits_chosen").get<bool>());
  EXPECT_TRUE(dp.at("delayed").get<bool>());
  // The layout's predicted iteration is the amortised one at that H.
  const double h = dp.at("sync_every").get<double>();
  EXPECT_NEAR(plan.at("predicted_iteration_s").get<double>(),
              dp.at("inner_step_s").get<double>() + dp.at("stall_per_sync_s").get<double>() / h,
              1e-9 * plan.at("predicted_iteration_s").get<double>());
}

TEST(TesselPlanSyncPeriod, TheTableSaysWhyAndComparesAtTheChosenH) {
  const TesselRun r = tessel(world_plan({"--sync-every", "auto", "--delta-bits", "auto"}));
  ASSERT_EQ(exit_code(r), 0) << r.shown();
  const TesselRun json = tessel(world_plan({"--format", "json"}));
  ASSERT_EQ(exit_code(json), 0) << json.shown();
  const int h = nlohmann::json::parse(json.out).at("data_parallel").at("sync_every").get<int>();
  const std::string mode = "low-communication H=" + std::to_string(h) + " 8-bit";
  EXPECT_NE(r.out.find("data parallelism: " + mode +
                       " (the exchange overlaps the next inner "
                       "step)\n  H=" +
                       std::to_string(h) +
                       ": the smallest H whose outer sync adds at most 5% to the inner step "
                       "(stall "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  8-bit deltas: the fewest bits whose measured loss cost is within 2% of "
                       "fp32 deltas'"),
            std::string::npos)
      << r.out;
  // Both layouts priced in the mode at that H.
  EXPECT_NE(r.out.find("\n" + mode + " "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data parallelism: synchronous against " + mode), std::string::npos)
      << r.out;
}

TEST(TesselPlanSyncPeriod, ALooserToleranceTakesASmallerOrEqualH) {
  const TesselRun strict = tessel(world_plan({"--format", "json"}));
  const TesselRun loose = tessel(world_plan({"--format", "json", "--sync-overhead", "0.25"}));
  ASSERT_EQ(exit_code(strict), 0) << strict.shown();
  ASSERT_EQ(exit_code(loose), 0) << loose.shown();
  const nlohmann::json dp = nlohmann::json::parse(loose.out).at("data_parallel");
  expect_smallest_within(dp, 0.25);
  EXPECT_LE(dp.at("sync_every").get<int>(),
            nlohmann::json::parse(strict.out).at("data_parallel").at("sync_every").get<int>());
}

TEST(TesselPlanSyncPeriod, TheModelFilesSectionChoosesToo) {
  const std::string file =
      ::testing::TempDir() + "/auto-model-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(file) << "preset: gpt3-1.3b\n"
                         "data_parallel: {mode: low-communication, sync_overhead: 0.25}\n";
  const TesselRun r = tessel({"plan", "--topology", kWorld, "--stages", "8", "--replicas", "8",
                              "--model", file, "--evaluations", "2000", "--format", "json"});
  std::filesystem::remove(file);
  ASSERT_EQ(exit_code(r), 0) << r.shown();
  expect_smallest_within(nlohmann::json::parse(r.out).at("data_parallel"), 0.25);
}

TEST(TesselPlanSyncPeriod, AGivenHIsKeptAndSaidToBeGiven) {
  const TesselRun r = tessel(world_plan({"--sync-every", "20", "--delta-bits", "4"}));
  ASSERT_EQ(exit_code(r), 0) << r.shown();
  EXPECT_NE(r.out.find("data parallelism: low-communication H=20 4-bit (the exchange overlaps the "
                       "next inner step)\n  H=20: given\n  4-bit deltas: given\n"),
            std::string::npos)
      << r.out;
  const TesselRun json = tessel(world_plan({"--sync-every", "20", "--format", "json"}));
  ASSERT_EQ(exit_code(json), 0) << json.shown();
  const nlohmann::json dp = nlohmann::json::parse(json.out).at("data_parallel");
  EXPECT_EQ(dp.at("sync_every"), 20);
  EXPECT_FALSE(dp.at("sync_every_chosen").get<bool>());
  EXPECT_FALSE(dp.contains("sync_every_reason"));
}

TEST(TesselPlanSyncPeriod, OneSiteTakesTheSmallestH) {
  // Eight GPUs in one site: no exchange crosses a slow link, the outer step alone is the stall.
  const std::string file = ::testing::TempDir() + "/one-site-" + std::to_string(getpid()) + ".yaml";
  std::string text =
      "format_version: 1\nid: one-site\nname: one site\ngpu_types:\n"
      "  g: {peak_tflops_fp16_tensor: 100, peak_tflops_fp32: 20, memory_gib: 80}\n"
      "sites:\n  - {name: lab, kind: lab, gpus: 8}\ndevices:\n";
  for (int d = 0; d < 8; ++d) text += "  - {id: " + std::to_string(d) + ", site: lab, gpu: g}\n";
  text += "network:\n  symmetric: true\n  intra_site: {latency_ms: 0.01, bandwidth_gbps: 100}\n";
  std::ofstream(file) << text;
  const TesselRun r = tessel({"plan", "--topology", file, "--stages", "2", "--replicas", "4",
                              "--preset", "gpt2-124m", "--evaluations", "200", "--data-parallel",
                              "low-communication", "--format", "json"});
  std::filesystem::remove(file);
  ASSERT_EQ(exit_code(r), 0) << r.shown();
  const nlohmann::json dp = nlohmann::json::parse(r.out).at("data_parallel");
  EXPECT_EQ(dp.at("sync_every"), kLadder.front()) << dp.dump();
  EXPECT_LE(dp.at("stall_per_sync_s").get<double>(), 0.05 * dp.at("inner_step_s").get<double>());
}

TEST(TesselSimulateSyncPeriod, SimulatesAtTheChosenHAndSaysWhy) {
  const TesselRun r =
      tessel({"simulate", "--topology", kWorld, "--stages", "8", "--replicas", "8", "--evaluations",
              "300", "--data-parallel", "low-communication", "--blocking-sync"});
  ASSERT_EQ(exit_code(r), 0) << r.shown();
  const auto at = r.out.find("\n  H=");
  ASSERT_NE(at, std::string::npos) << r.out;
  const int h = std::stoi(r.out.substr(at + 5));
  EXPECT_NE(r.out.find("every " + std::to_string(h) +
                       " steps each stage exchanges its 8-bit delta "
                       "between sites (waited)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("iteration amortised over the " + std::to_string(h) + " steps"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("H=" + std::to_string(h) +
                       ": the smallest H whose outer sync adds at most "
                       "5% to the inner step"),
            std::string::npos)
      << r.out;
}

TEST(TesselPlanSyncPeriod, BadValuesAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"--sync-every", "often"},
       "--sync-every: must be auto or an integer in [1, 10000] (the runtime's limit), got 'often'"},
      {{"--sync-every", "0"}, "--sync-every: must be auto or an integer in [1, 10000]"},
      {{"--delta-bits", "16"}, "--delta-bits"},
      {{"--sync-overhead", "0"},
       "--sync-overhead: must be a finite number in (0, 1] (a fraction of the inner step), got "
       "'0'"},
      {{"--sync-overhead", "1.5"}, "--sync-overhead: must be a finite number in (0, 1]"},
      {{"--sync-overhead", "nan"}, "--sync-overhead: must be a finite number in (0, 1]"},
      {{"--sync-every", "20", "--sync-overhead", "0.1"},
       "--sync-overhead applies when the planner chooses H: H is given (20)"},
  };
  for (const Case& c : cases) {
    const TesselRun r = tessel(world_plan(c.args));
    EXPECT_NE(exit_code(r), 0) << r.shown();
    EXPECT_NE(r.err.find(c.error), std::string::npos) << c.error << r.shown();
  }
  const TesselRun alone = tessel({"plan", "--topology", kWorld, "--stages", "8", "--replicas", "8",
                                  "--evaluations", "10", "--sync-overhead", "0.1"});
  EXPECT_NE(exit_code(alone), 0);
  EXPECT_NE(alone.err.find("--sync-overhead applies to the low-communication mode only"),
            std::string::npos)
      << alone.shown();
}

}  // namespace
