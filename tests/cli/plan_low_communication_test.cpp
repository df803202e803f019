// `tessel plan` and `tessel simulate` with the low-communication mode (issue 15): on the
// worldwide scenario with GPT3-1.3B, synchronous data parallelism and the mode side by side,
// each with the layout its own search picks.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <regex>
#include <string>

#include "tessel_run.h"

namespace {

using tessel::cli_testing::run_tessel;
using tessel::cli_testing::TesselRun;

const std::string kWorld =
    std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/5-worldwide-geo.yaml";

TesselRun tessel(std::vector<std::string> args) {
  return run_tessel(args, {.dir = "", .timeout_s = 120, .fsize_limit = 0, .on_stderr = nullptr});
}

int exit_code(const TesselRun& r) {
  return WIFEXITED(r.raw_status) ? WEXITSTATUS(r.raw_status) : -1;
}

struct Row {
  double iteration_s = 0, comm_s = 0, megabytes = 0;
};

// The comparison's row "<priced as> <layout planned for> <iteration> s <comm> s <MB> MB".
Row row(const std::string& out, const std::string& priced, const std::string& layout) {
  const std::regex line(priced + " +" + layout + " +([0-9.]+) s +([0-9.]+) s +([0-9.]+) MB");
  std::smatch m;
  if (!std::regex_search(out, m, line)) {
    ADD_FAILURE() << "no row '" << priced << "' x '" << layout << "' in\n" << out;
    return {};
  }
  return {std::stod(m[1]), std::stod(m[2]), std::stod(m[3])};
}

TEST(TesselPlanLowCommunication, ComparesBothModesWithTheLayoutEachPicks) {
  const TesselRun r = tessel({"plan", "--topology", kWorld, "--stages", "8", "--replicas", "8",
                              "--preset", "gpt3-1.3b", "--evaluations", "2000", "--data-parallel",
                              "low-communication", "--sync-every", "50", "--delta-bits", "8"});
  ASSERT_EQ(exit_code(r), 0) << r.shown();
  const std::string mode = "low-communication H=50 8-bit";
  const Row sync_sync = row(r.out, "synchronous", "synchronous");
  const Row sync_mode = row(r.out, "synchronous", "low-communication");
  const Row mode_sync = row(r.out, mode, "synchronous");
  const Row mode_mode = row(r.out, mode, "low-communication");
  // Each search's layout is the better one under its own mode.
  EXPECT_LE(sync_sync.iteration_s, sync_mode.iteration_s) << r.out;
  EXPECT_LE(mode_mode.iteration_s, mode_sync.iteration_s) << r.out;
  // The mode's data-parallel traffic per step is a small fraction of synchronous training's.
  EXPECT_LT(mode_mode.comm_s, sync_sync.comm_s / 5) << r.out;
  EXPECT_LT(mode_mode.megabytes, sync_sync.megabytes / 20) << r.out;
  EXPECT_LT(mode_mode.iteration_s, sync_sync.iteration_s) << r.out;
  // Both layouts are shown, pipeline by pipeline, and how they spread over the sites.
  EXPECT_NE(r.out.find("layout planned for synchronous: pipelines over"), std::string::npos);
  EXPECT_NE(r.out.find("layout planned for low-communication: pipelines over 1.0 sites (max 1), "
                       "stage groups over 8.0 sites (max 8)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  replica 7: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the two searches chose different layouts"), std::string::npos) << r.out;
}

TEST(TesselPlanLowCommunication, SynchronousPlansPrintNoComparison) {
  const TesselRun r = tessel(
      {"plan", "--topology", kWorld, "--stages", "8", "--replicas", "8", "--evaluations", "200"});
  ASSERT_EQ(exit_code(r), 0) << r.shown();
  EXPECT_EQ(r.out.find("data parallelism: synchronous against"), std::string::npos) << r.out;
}

TEST(TesselSimulateLowCommunication, ShowsTheExchangeAndTheAmortisedIteration) {
  const TesselRun r = tessel({"simulate", "--topology", kWorld, "--stages", "8", "--replicas", "8",
                              "--evaluations", "300", "--data-parallel", "low-communication",
                              "--sync-every", "20", "--blocking-sync"});
  ASSERT_EQ(exit_code(r), 0) << r.shown();
  EXPECT_NE(r.out.find("delta exchange"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every 20 steps each stage exchanges its 8-bit delta between sites "
                       "(waited)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("iteration amortised over the 20 steps"), std::string::npos) << r.out;
}

TEST(TesselPlanLowCommunication, RefusesTheModesSettingsWithoutTheModeAndBadValues) {
  const std::vector<std::string> base = {
      "plan", "--topology", kWorld, "--stages", "8", "--replicas", "8", "--evaluations", "10"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return tessel(args);
  };
  const TesselRun alone = with({"--sync-every", "10"});
  EXPECT_NE(exit_code(alone), 0);
  EXPECT_NE(alone.err.find("--sync-every applies to the low-communication mode only"),
            std::string::npos)
      << alone.shown();
  const TesselRun bits = with({"--data-parallel", "low-communication", "--delta-bits", "16"});
  EXPECT_NE(exit_code(bits), 0);
  EXPECT_NE(bits.err.find("--delta-bits"), std::string::npos) << bits.shown();
  const TesselRun h = with({"--data-parallel", "low-communication", "--sync-every", "0"});
  EXPECT_NE(exit_code(h), 0);
  EXPECT_NE(h.err.find("--sync-every"), std::string::npos) << h.shown();
  const TesselRun paper = with({"--data-parallel", "low-communication", "--cost-model", "paper"});
  EXPECT_NE(exit_code(paper), 0);
  EXPECT_NE(paper.err.find("needs --cost-model full"), std::string::npos) << paper.shown();
}

}  // namespace
