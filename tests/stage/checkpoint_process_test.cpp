// Checkpoints of a shared dir through real tessel-stage processes: `resume: true` with no
// checkpoint yet starts at step 0 and says so; a damaged rank file or a missing manifest is
// skipped, named on stderr, and the previous step resumed with the losses of an uninterrupted
// run; a stage with no usable state fails every rank before the first step with one error (nobody
// waits for the I/O timeout); `keep` prunes step folders and is checked in job.json; a file-size
// limit during a save fails with the file and "File too large", not SIGXFSZ.
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

// The losses of the steps after `from` of every rank resumed from `from` equal the
// uninterrupted run's (`whole`, steps 1..n), bit for bit.
void expect_continues(const std::vector<std::unique_ptr<StageProcess>>& processes, int64_t from,
                      const std::vector<double>& whole) {
  for (const auto& p : processes) {
    EXPECT_EQ(p->lines().front()["resumed_from"], from) << p->stderr_text();
    ASSERT_EQ(p->losses().size(), whole.size() - static_cast<size_t>(from)) << p->stderr_text();
    for (size_t i = 0; i < p->losses().size(); ++i) {
      EXPECT_EQ(p->losses()[i], whole[static_cast<size_t>(from) + i]) << "step " << from + 1 + i;
    }
  }
}

TEST_F(CheckpointProcesses, ADamagedRankFileIsSkippedNamingItAndThePreviousStepResumed) {
  std::vector<double> whole;  // the uninterrupted run of 4 steps
  for (auto& p : launch(job(4))) {
    ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    whole = p->losses();
  }
  fs::remove_all(ckpt());
  for (auto& p : launch(job(2))) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  // Stage 1 has one replica: its damaged file of step 2 leaves step 1 the newest every stage has.
  const std::string rank1 = checkpoint_rank_file(ckpt(), 2, 1);
  testing::overwrite_float(rank1, "lm_head.weight", 3, 1e30f);
  auto processes = launch(job(4));
  for (auto& p : processes) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  EXPECT_NE(processes[1]->stderr_text().find(
                "tessel-stage rank 1 (stage 1 replica 0): resume: skipping step 2: " + rank1 +
                ": tensor 'lm_head.weight': checksum mismatch"),
            std::string::npos)
      << processes[1]->stderr_text();
  EXPECT_NE(processes[1]->stderr_text().find("tessel-stage rank 1 (stage 1 replica 0): resume: "
                                             "step 1: state from " +
                                             checkpoint_rank_file(ckpt(), 1, 1)),
            std::string::npos)
      << processes[1]->stderr_text();
  EXPECT_NE(processes[0]->stderr_text().find("resume: step 1: state from " +
                                             checkpoint_rank_file(ckpt(), 1, 0)),
            std::string::npos)
      << processes[0]->stderr_text();
  expect_continues(processes, 1, whole);
  EXPECT_EQ(latest_checkpoint(ckpt()), 4);  // the damaged step 2 was written again
}

TEST_F(CheckpointProcesses, NoUsableStateOfAStageFailsEveryRankBeforeTheFirstStepNamingIt) {
  for (auto& p : launch(job(2))) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  for (int64_t step : {1, 2}) {
    testing::overwrite_float(checkpoint_rank_file(ckpt(), step, 1), "lm_head.weight", 3, 1e30f);
  }
  const auto before = testing::snapshot(ckpt());
  auto processes = launch(job(4));
  for (auto& p : processes) {
    EXPECT_EQ(p->finish(60s), 1);
    EXPECT_NE(p->stderr_text().find("error: resume: no checkpoint step at which every stage has a "
                                    "verified state (checkpoint.shared: true, " +
                                    ckpt() + "): no rank holds a state of stage 1"),
              std::string::npos)
        << p->stderr_text();
    for (const auto& line : p->lines()) EXPECT_NE(line["event"], "step") << line.dump();
  }
  for (int64_t step : {1, 2}) {
    EXPECT_NE(processes[1]->stderr_text().find("resume: skipping step " + std::to_string(step) +
                                               ": " + checkpoint_rank_file(ckpt(), step, 1) +
                                               ": tensor 'lm_head.weight': checksum mismatch"),
              std::string::npos)
        << processes[1]->stderr_text();
  }
  EXPECT_EQ(testing::snapshot(ckpt()), before);
}

TEST_F(CheckpointProcesses, AMissingManifestCostsTheNewestStepSaidByEveryRank) {
  std::vector<double> whole;
  for (auto& p : launch(job(4))) {
    ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    whole = p->losses();
  }
  fs::remove_all(ckpt());
  for (auto& p : launch(job(2))) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  fs::remove(checkpoint_manifest(ckpt()));
  auto processes = launch(job(4));
  for (auto& p : processes) {
    ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    EXPECT_NE(p->stderr_text().find("resume: skipping step 2: " + checkpoint_manifest(ckpt()) +
                                    ": missing; it commits the newest step, which is therefore "
                                    "not used"),
              std::string::npos)
        << p->stderr_text();
  }
  expect_continues(processes, 1, whole);
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
