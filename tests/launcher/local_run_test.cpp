// `tessel local` end to end through the real binaries: a 2 x 2 job finishes and leaves its
// report, loss curve and merged trace; a killed stage process ends the job with an error
// naming it; SIGINT stops every process; a killed launcher takes its processes with it; a bad
// job file is refused before anything starts. No test leaves a process behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "launcher_process.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::LauncherProcess;

using LocalRun = testing::JobFolderTest;

TEST_F(LocalRun, TwoByTwoJobFinishesWithReportLossCurveAndTrace) {
  LauncherProcess launcher(
      {"local", write_job(testing::tiny_job_yaml(3)), "--output", out(), "--trace"});
  ASSERT_EQ(launcher.finish(120s), 0) << launcher.output();
  for (const char* line : {"step 1/3  loss ", "step 2/3  loss ", "step 3/3  loss "}) {
    EXPECT_NE(launcher.output().find(line), std::string::npos) << launcher.output();
  }
  EXPECT_NE(launcher.output().find("ETA "), std::string::npos);
  const std::string text = report();
  EXPECT_NE(text.find("**done**: 3 of 3 steps"), std::string::npos) << text;
  EXPECT_NE(text.find("| iteration | "), std::string::npos) << text;
  EXPECT_NE(text.find("unigram entropy"), std::string::npos) << text;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(text.find("| stage " + std::to_string(rank % 2) + " replica " +
                        std::to_string(rank / 2) + " |"),
              std::string::npos)
        << text;
  }
  std::ifstream svg(dir_ / "out" / "loss.svg");
  const std::string curve((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_EQ(curve.rfind("<svg ", 0), 0u);
  EXPECT_NE(curve.find("<polyline fill=\"none\" stroke=\"#1f77b4\""), std::string::npos);

  const auto trace = nlohmann::json::parse(std::ifstream(dir_ / "out" / "trace.json"));
  std::set<int> ranks;
  std::set<std::string> streams;
  double earliest = 1e300;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.at("ph") != "X") continue;
    ranks.insert(event.at("pid").get<int>());
    streams.insert(event.at("cat").get<std::string>());
    earliest = std::min(earliest, event.at("ts").get<double>());
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(earliest, 0);
  for (const char* stream : {"2. forward-compute", "5. backward-compute", "3. forward-send",
                             "1. forward-recv", "7. optimizer-comm"}) {
    EXPECT_TRUE(streams.count(stream)) << stream;
  }
  const auto job = nlohmann::json::parse(std::ifstream(dir_ / "out" / "job.json"));
  EXPECT_EQ(job.at("ranks").size(), 4u);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "logs" / "rank-3.log"));
}

TEST_F(LocalRun, KilledStageProcessEndsTheJobWithAnErrorNamingIt) {
  LauncherProcess launcher(
      {"local", write_job(testing::tiny_job_yaml(100000)), "--output", out(), "--grace", "20"});
  ASSERT_TRUE(launcher.wait_for_line("step 2/", 120s)) << launcher.output();
  const auto children = testing::four_children(launcher.pid());
  ASSERT_EQ(children.size(), 4u);
  const pid_t victim = testing::pid_of_rank(children, 1);
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  EXPECT_EQ(launcher.finish(60s), 1) << launcher.output();
  EXPECT_NE(launcher.output().find("error: stage 1 replica 0 (rank 1) (pid " +
                                   std::to_string(victim) + ") was killed by SIGKILL"),
            std::string::npos)
      << launcher.output();
  testing::expect_all_gone(children);
  EXPECT_NE(report().find("**failed**: stage 1 replica 0 (rank 1)"), std::string::npos);
}

TEST_F(LocalRun, SigintStopsEveryStageProcessAfterItsStep) {
  LauncherProcess launcher({"local", write_job(testing::tiny_job_yaml(100000)), "--output", out()});
  ASSERT_TRUE(launcher.wait_for_line("step 1/", 120s)) << launcher.output();
  const auto children = testing::four_children(launcher.pid());
  ASSERT_EQ(children.size(), 4u);
  ASSERT_EQ(kill(launcher.pid(), SIGINT), 0);
  EXPECT_EQ(launcher.finish(60s), 128 + SIGINT) << launcher.output();
  EXPECT_NE(launcher.output().find("tessel local: stopping"), std::string::npos);
  EXPECT_NE(launcher.output().find("tessel local: stopped by SIGINT after step "),
            std::string::npos)
      << launcher.output();
  testing::expect_all_gone(children);
  const std::string text = report();
  EXPECT_NE(text.find("**stopped** by SIGINT: "), std::string::npos) << text;
  // Every process stopped by itself after its step: none needed killing.
  EXPECT_EQ(text.find("killed"), std::string::npos) << text;
}

TEST_F(LocalRun, KilledLauncherTakesItsStageProcessesWithIt) {
  LauncherProcess launcher({"local", write_job(testing::tiny_job_yaml(100000)), "--output", out()});
  ASSERT_TRUE(launcher.wait_for_line("step 1/", 120s)) << launcher.output();
  const auto children = testing::four_children(launcher.pid());
  ASSERT_EQ(children.size(), 4u);
  ASSERT_EQ(kill(launcher.pid(), SIGKILL), 0);
  EXPECT_EQ(launcher.finish(30s), 128 + SIGKILL);
  testing::expect_all_gone(children);
}

TEST_F(LocalRun, BadJobFileIsRefusedNamingTheField) {
  LauncherProcess launcher({"local",
                            write_job("training: {steps: -3, micro_batch: 1, global_batch: 1}\n"),
                            "--output", out()});
  EXPECT_EQ(launcher.finish(30s), 1);
  EXPECT_NE(launcher.output().find("job.yaml: training.steps: must be in [1, "), std::string::npos)
      << launcher.output();
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
}  // namespace tessel::launcher
