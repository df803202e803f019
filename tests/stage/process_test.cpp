// tessel-stage as real processes over 127.0.0.1: a 2 x 2 job matches the single-process
// reference, a job stopped and resumed from its checkpoint continues bit for bit, a killed
// peer is named by the survivors within the I/O timeout, SIGTERM stops every rank after the
// same step, and a bad job file is refused.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "proto/rendezvous/rendezvous_server.h"
#include "stage_process_support.h"
#include "stage_test_support.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::StageProcess;

class Processes : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-stage-proc-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_job(const nlohmann::json& job, const std::string& name = "job.json") {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << job.dump(2);
    return path;
  }

  std::vector<std::unique_ptr<StageProcess>> launch(const std::string& job_path, int ranks) {
    std::vector<std::unique_ptr<StageProcess>> processes;
    for (int r = 0; r < ranks; ++r)
      processes.push_back(std::make_unique<StageProcess>(job_path, r));
    return processes;
  }

  fs::path dir_;
};

TEST_F(Processes, TwoByTwoMatchesTheSingleProcessReference) {
  constexpr int kSteps = 3;
  const auto job = testing::tiny_job(2, 2, 4, 4, "1f1b", kSteps);
  auto processes = launch(write_job(job), 4);
  const testing::RunResult reference =
      testing::run_reference(testing::tiny_config(4), 2,
                             testing::tiny_options(placement::ScheduleKind::OneFOneB, 4), kSteps);
  for (auto& p : processes) {
    ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    const std::vector<double> losses = p->losses();
    ASSERT_EQ(losses.size(), size_t{kSteps});
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(losses[s], reference.losses[0][s], 1e-5 * reference.losses[0][s]);
    }
    EXPECT_EQ(p->lines().front()["event"], "start");
    EXPECT_EQ(p->lines().back()["event"], "done");
    EXPECT_EQ(p->lines()[1]["tokens"], 2 * 2 * 4 * 16);
  }
}

TEST_F(Processes, ResumedJobContinuesBitForBit) {
  auto job = testing::tiny_job(2, 1, 4, 2, "gpipe", 3);
  job["trace"] = {{"path", (dir_ / "trace-{rank}.json").string()}};
  std::vector<double> whole;
  {
    auto processes = launch(write_job(job, "whole.json"), 2);
    for (auto& p : processes) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    whole = processes[0]->losses();
  }
  const auto trace = nlohmann::json::parse(std::ifstream(dir_ / "trace-1.json"));
  EXPECT_GT(trace["traceEvents"].size(), 10u);

  job["checkpoint"] = {{"dir", (dir_ / "ckpt").string()}, {"interval", 1}, {"resume", true}};
  job["training"]["steps"] = 2;
  {
    auto processes = launch(write_job(job, "first.json"), 2);
    for (auto& p : processes) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  }
  job["training"]["steps"] = 3;
  auto processes = launch(write_job(job, "rest.json"), 2);
  for (auto& p : processes) {
    ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    EXPECT_EQ(p->lines().front()["resumed_from"], 2);
    ASSERT_EQ(p->losses().size(), 1u);
    EXPECT_EQ(p->losses()[0], whole[2]);  // bit for bit
  }
}

TEST_F(Processes, AKilledPeerIsNamedWithinTheTimeout) {
  auto job = testing::tiny_job(2, 1, 4, 2, "1f1b", 100000);
  job["timeouts"]["io_s"] = 10;
  auto processes = launch(write_job(job), 2);
  ASSERT_TRUE(processes[0]->next_line(30s));  // start
  ASSERT_TRUE(processes[0]->next_line(30s));  // a first step: the mesh is up
  kill(processes[1]->pid(), SIGKILL);
  EXPECT_EQ(processes[0]->finish(20s), 1);
  EXPECT_NE(processes[0]->stderr_text().find("stage 1 replica 0"), std::string::npos)
      << processes[0]->stderr_text();
  // Noticed as the closed connection it is, not after the 10 s io timeout ("no data for 10 s").
  EXPECT_NE(processes[0]->stderr_text().find("connection closed"), std::string::npos)
      << processes[0]->stderr_text();
  EXPECT_EQ(processes[0]->stderr_text().find("no data for"), std::string::npos)
      << processes[0]->stderr_text();
  EXPECT_EQ(processes[0]->lines().back()["event"], "error");
  EXPECT_EQ(processes[1]->finish(5s), 128 + SIGKILL);
}

TEST_F(Processes, SigtermStopsEveryRankAfterTheSameStepWithACheckpoint) {
  auto job = testing::tiny_job(2, 2, 4, 2, "1f1b", 100000);
  job["checkpoint"] = {{"dir", (dir_ / "ckpt").string()}};
  auto processes = launch(write_job(job), 4);
  for (auto& p : processes) {
    ASSERT_TRUE(p->next_line(30s));  // start
    ASSERT_TRUE(p->next_line(30s));  // a first step
  }
  kill(processes[2]->pid(), SIGTERM);
  std::vector<int64_t> stopped_at;
  for (int rank = 0; rank < 4; ++rank) {
    StageProcess& p = *processes[rank];
    EXPECT_EQ(p.finish(30s), rank == 2 ? 128 + SIGTERM : 0) << p.stderr_text();
    const nlohmann::json& last = p.lines().back();
    ASSERT_EQ(last["event"], "stopped") << last.dump();
    EXPECT_EQ(last["signal"], rank == 2 ? nlohmann::json("SIGTERM") : nlohmann::json());
    stopped_at.push_back(last["step"].get<int64_t>());
  }
  EXPECT_EQ(stopped_at, std::vector<int64_t>(4, stopped_at[0]));
  EXPECT_TRUE(fs::exists(dir_ / "ckpt" /
                         ("step-" + std::string(8 - std::to_string(stopped_at[0]).size(), '0') +
                          std::to_string(stopped_at[0])) /
                         "manifest.json"));
}

// A rendezvous of the test's own: every rank binds a port the kernel picks and takes the table
// from it, and the job trains as the single-process reference does; a token the service does not
// know, and a token file that is missing, are named.
TEST_F(Processes, RanksFindEachOtherThroughTheRendezvous) {
  constexpr int kSteps = 2;
  rendezvous::RendezvousServer server("127.0.0.1:0", grpc::InsecureServerCredentials());
  const std::string token = "0123456789abcdef0123456789abcdef";
  auto job = testing::tiny_job(2, 2, 4, 4, "1f1b", kSteps);
  job["job_id"] = 77;
  for (auto& rank : job["ranks"]) rank["port"] = 0;
  const std::string token_path = (dir_ / "token").string();
  std::ofstream(token_path) << token << "\n";
  job["rendezvous"] = {{"address", "127.0.0.1:" + std::to_string(server.port())},
                       {"token_file", token_path}};
  server.table().add_job(77, 4, token);
  auto processes = launch(write_job(job), 4);
  const testing::RunResult reference =
      testing::run_reference(testing::tiny_config(4), 2,
                             testing::tiny_options(placement::ScheduleKind::OneFOneB, 4), kSteps);
  for (auto& p : processes) {
    ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    ASSERT_EQ(p->losses().size(), size_t{kSteps});
    EXPECT_NEAR(p->losses()[1], reference.losses[0][1], 1e-5 * reference.losses[0][1]);
  }
  const auto table = server.table().table(77);
  ASSERT_TRUE(table.has_value());
  for (const std::string& address : table->addresses) {
    EXPECT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
    EXPECT_NE(address, "127.0.0.1:0");
  }

  // A token the service does not know is refused at once, naming the service and the job.
  std::ofstream(token_path) << "fedcba9876543210fedcba9876543210\n";
  StageProcess refused(write_job(job, "refused.json"), 0);
  EXPECT_EQ(refused.finish(30s), 1);
  EXPECT_NE(refused.stderr_text().find("job 77: unknown job or wrong token"), std::string::npos)
      << refused.stderr_text();
  // A token file that is missing is named.
  fs::remove(token_path);
  StageProcess missing(write_job(job, "missing.json"), 0);
  EXPECT_EQ(missing.finish(30s), 1);
  EXPECT_NE(missing.stderr_text().find("rendezvous.token_file: " + token_path + ": cannot read"),
            std::string::npos)
      << missing.stderr_text();
}

TEST_F(Processes, BadJobFilesAndArgumentsAreRefused) {
  auto job = testing::tiny_job(2, 1, 4, 2, "1f1b", 1);
  job["pipeline"]["stages"] = "two";
  StageProcess bad_field(write_job(job), 0);
  EXPECT_EQ(bad_field.finish(10s), 2);
  EXPECT_NE(bad_field.stderr_text().find("pipeline.stages: expected an integer"), std::string::npos)
      << bad_field.stderr_text();
  StageProcess bad_rank(write_job(testing::tiny_job(2, 1, 4, 2, "1f1b", 1), "ok.json"), 5);
  EXPECT_EQ(bad_rank.finish(10s), 1);
  EXPECT_NE(bad_rank.stderr_text().find("--rank 5 is out of range [0, 2)"), std::string::npos)
      << bad_rank.stderr_text();
}

}  // namespace
}  // namespace tessel::stage
