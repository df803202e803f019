// Ctrl-C during a long `tessel plan`, as a user presses it: the search stops, the best
// placement found so far is printed in the requested format (a placement `tessel simulate`
// accepts), stderr says it was interrupted after how many evaluations, and the exit code is
// 130. The bounds below are generous timeouts, not timings.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/tessel_run.h"

namespace {

const std::string kTopology =
    std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/5-worldwide-geo.yaml";

struct Interrupted : tessel::cli_testing::TesselRun {
  bool started = false;  // stderr showed the search running before the SIGINT
};

// Runs tessel with args; once its stderr contains `running` (the search has begun), sends it
// SIGINT, then reads it to the end. The search must begin within 120 s (a loaded machine), and
// end within another 120 s of the SIGINT.
Interrupted interrupt_tessel(const std::vector<std::string>& args, const std::string& running) {
  bool sent = false;
  tessel::cli_testing::TesselRunOptions options;
  options.timeout_s = 120;
  options.on_stderr = [&](pid_t pid, const std::string& err) {
    if (sent || err.find(running) == std::string::npos) return false;
    kill(pid, SIGINT);
    sent = true;
    return true;
  };
  Interrupted r;
  static_cast<tessel::cli_testing::TesselRun&>(r) = tessel::cli_testing::run_tessel(args, options);
  r.started = sent;
  return r;
}

// A budget of ten million evaluations on one thread: minutes at the least, so the estimate
// line (printed once the rate is measured, when the budget needs more than a minute) shows
// the search running.
const std::vector<std::string> kLongPlan = {"plan", "--topology",    kTopology, "--stages",
                                            "8",    "--replicas",    "8",       "--threads",
                                            "1",    "--evaluations", "10000000"};
const std::string kRunning = "evaluations a second";

TEST(TesselPlanInterrupt, CtrlCPrintsTheBestPlacementSoFarAsJson) {
  std::vector<std::string> args = kLongPlan;
  args.insert(args.end(), {"--format", "json"});
  const Interrupted r = interrupt_tessel(args, kRunning);
  ASSERT_TRUE(r.started) << "the search never said it was running" << r.shown();
  ASSERT_FALSE(r.timed_out) << "still running 120 s after SIGINT" << r.shown();
  ASSERT_TRUE(WIFEXITED(r.raw_status)) << "ended by signal " << WTERMSIG(r.raw_status) << r.shown();
  EXPECT_EQ(WEXITSTATUS(r.raw_status), 130) << r.shown();
  EXPECT_NE(r.err.find("tessel plan: interrupted after "), std::string::npos) << r.shown();
  EXPECT_NE(r.err.find(" of 10000000 evaluations"), std::string::npos) << r.shown();
  EXPECT_NE(r.err.find("the best placement found so far"), std::string::npos) << r.shown();
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.shown();

  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.shown();
  EXPECT_EQ(j["interrupted"], true);
  const long evaluations = j["evaluations"].get<long>();
  EXPECT_GT(evaluations, 0);
  EXPECT_LT(evaluations, 10000000);
  EXPECT_EQ(j["pipelines"].size(), 8u);

  // The placement is whole and valid: `tessel simulate` checks it and runs it.
  const std::string file = ::testing::TempDir() + "/interrupted-plan.json";
  std::ofstream(file) << r.out;
  const std::string cmd = std::string(TESSEL_BINARY) + " simulate --topology " + kTopology +
                          " --stages 8 --replicas 8 --placement " + file + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("iteration: simulated"), std::string::npos) << output;
}

TEST(TesselPlanInterrupt, CtrlCWritesTheTableToTheOutputFile) {
  const std::string file = ::testing::TempDir() + "/interrupted-plan.txt";
  std::remove(file.c_str());
  std::vector<std::string> args = kLongPlan;
  args.insert(args.end(), {"--output", file});
  const Interrupted r = interrupt_tessel(args, kRunning);
  ASSERT_TRUE(r.started) << r.shown();
  ASSERT_FALSE(r.timed_out) << r.shown();
  ASSERT_TRUE(WIFEXITED(r.raw_status)) << r.shown();
  EXPECT_EQ(WEXITSTATUS(r.raw_status), 130) << r.shown();
  EXPECT_NE(r.err.find("is written to " + file), std::string::npos) << r.shown();
  std::ifstream in(file);
  const std::string table((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(table.find("(interrupted: the best placement found so far)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("predicted iteration"), std::string::npos) << table;
}

}  // namespace
