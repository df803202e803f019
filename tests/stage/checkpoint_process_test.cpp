// Checkpoints through real tessel-stage processes: `resume: true` with no checkpoint yet starts
// at step 0 and says so; a damaged rank file fails every rank before the first step, the rank
// whose file it is with the file and tensor named, the others naming that rank (nobody waits
// for the I/O timeout); `keep` prunes step folders and is checked in job.json; a file-size limit
// during a save fails with the file and "File too large", not SIGXFSZ.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "checkpoint_damage.h"
#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/job_spec.h"
#include "stage_process_support.h"
#include "tests/full_disk.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::StageProcess;

class CheckpointProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-stage-ckpt-proc-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ckpt() const { return (dir_ / "ckpt").string(); }

  nlohmann::json job(int steps, int keep = 3) const {
    auto j = testing::tiny_job(2, 1, 4, 2, "1f1b", steps);
    j["checkpoint"] = {{"dir", ckpt()}, {"interval", 1}, {"resume", true}, {"keep", keep}};
    return j;
  }

  std::vector<std::unique_ptr<StageProcess>> launch(const nlohmann::json& j) {
    const std::string path = (dir_ / ("job-" + std::to_string(runs_++) + ".json")).string();
    std::ofstream(path) << j.dump(2);
    std::vector<std::unique_ptr<StageProcess>> processes;
    for (int r = 0; r < 2; ++r) processes.push_back(std::make_unique<StageProcess>(path, r));
    return processes;
  }

  fs::path dir_;
  int runs_ = 0;
};

TEST_F(CheckpointProcesses, ResumeWithNoCheckpointYetStartsAtStepZeroAndSaysSo) {
  auto processes = launch(job(2));
  for (auto& p : processes) {
    ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    EXPECT_TRUE(p->lines().front()["resumed_from"].is_null()) << p->lines().front().dump();
  }
  EXPECT_NE(processes[0]->stderr_text().find("resume: no checkpoint in " + ckpt() +
                                             " yet (no manifest.json): starting from step 0"),
            std::string::npos)
      << processes[0]->stderr_text();
  EXPECT_EQ(latest_checkpoint(ckpt()), 2);
}

TEST_F(CheckpointProcesses, ADamagedRankFileFailsEveryRankBeforeTheFirstStepNamingIt) {
  for (auto& p : launch(job(2))) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  const std::string rank1 = checkpoint_rank_file(ckpt(), 2, 1);
  testing::overwrite_float(rank1, "lm_head.weight", 3, 1e30f);
  const auto before = testing::snapshot(ckpt());
  auto processes = launch(job(4));
  EXPECT_EQ(processes[1]->finish(60s), 1);
  EXPECT_NE(
      processes[1]->stderr_text().find("tessel-stage rank 1 (stage 1 replica 0): error: " + rank1 +
                                       ": tensor 'lm_head.weight': checksum mismatch"),
      std::string::npos)
      << processes[1]->stderr_text();
  EXPECT_EQ(processes[0]->finish(60s), 1);
  EXPECT_NE(processes[0]->stderr_text().find("resume from step 2: not starting: stage 1 replica 0 "
                                             "(rank 1) could not load its checkpoint"),
            std::string::npos)
      << processes[0]->stderr_text();
  for (auto& p : processes) {
    for (const auto& line : p->lines()) EXPECT_NE(line["event"], "step") << line.dump();
  }
  EXPECT_EQ(testing::snapshot(ckpt()), before);
}

TEST_F(CheckpointProcesses, AMissingManifestFailsRankZeroAndTheOthersNameIt) {
  for (auto& p : launch(job(2))) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  fs::remove(checkpoint_manifest(ckpt()));
  auto processes = launch(job(4));
  EXPECT_EQ(processes[0]->finish(60s), 1);
  EXPECT_NE(processes[0]->stderr_text().find(checkpoint_manifest(ckpt()) + ": missing"),
            std::string::npos)
      << processes[0]->stderr_text();
  EXPECT_EQ(processes[1]->finish(60s), 1);
  EXPECT_NE(processes[1]->stderr_text().find(
                "stage 0 replica 0 (rank 0) could not read the checkpoint manifest"),
            std::string::npos)
      << processes[1]->stderr_text();
}

TEST_F(CheckpointProcesses, KeepPrunesStepFoldersAndIsChecked) {
  for (auto& p : launch(job(6, 2))) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(ckpt())) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"manifest.json", "step-00000005", "step-00000006"}));

  auto bad = job(1, 0);
  try {
    parse_job_spec(bad.dump(), "job.json");
    FAIL() << "keep 0 accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.keep: must be in [1, "), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(parse_job_spec(job(1, 7).dump(), "job.json").checkpoint.keep, 7);
  bad["checkpoint"].erase("keep");
  EXPECT_EQ(parse_job_spec(bad.dump(), "job.json").checkpoint.keep, kDefaultCheckpointKeep);
}

TEST_F(CheckpointProcesses, AFileSizeLimitDuringASaveNamesTheFileNotSigxfsz) {
  // The children inherit a 4 KiB file-size limit with SIGXFSZ at its default (terminate):
  // tessel-stage ignores it itself, so the write fails with EFBIG and says so.
  tessel::testing::FullDisk full(4096, false);  // the job file written meanwhile is smaller
  auto processes = launch(job(2));
  full.restore();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(processes[rank]->finish(60s), 1) << processes[rank]->stderr_text();
    EXPECT_NE(processes[rank]->stderr_text().find(
                  "checkpoint step 1: " + checkpoint_rank_file(ckpt(), 1, rank) +
                  ": cannot write: File too large"),
              std::string::npos)
        << processes[rank]->stderr_text();
  }
  EXPECT_EQ(latest_checkpoint(ckpt()), std::nullopt);
}

}  // namespace
}  // namespace tessel::stage
