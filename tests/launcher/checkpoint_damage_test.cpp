// Damaged checkpoints through real `tessel local` runs (one shared checkpoint dir): the fables
// example shrunk to a few steps (checkpoint: {interval: 1, resume: true}) trains 3 steps once
// (and 5 steps once, uninterrupted, for the losses to compare with); each case copies the
// 3-step output folder, damages its checkpoint the way a disk, a person or a buggy run can, and
// resumes to step 5. Damage is skipped (issue 14): a rank whose file of the newest step does
// not verify loads its data-parallel peer's file of it; a step no replica of some stage holds
// verified, or one whose manifests are torn, missing or edited, costs that step and the
// previous one is resumed. Every skip is named (the file and the fault) by the launcher and in
// report.md, and the losses after the resume are an uninterrupted run's. A checkpoint nothing
// usable is left in, or of an older format, still ends the run cleanly (exit 1, no signal)
// with the launcher's error saying why, and leaves every checkpoint file as it was. keep: 2
// leaves two step folders; a full disk during a save names the file and the cause and keeps
// the previous checkpoint.
#include "../stage/checkpoint_damage.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "launcher_process.h"
#include "noderuntime/launcher/local_job.h"
#include "tests/full_disk.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using stage::checkpoint_manifest;
using stage::checkpoint_rank_file;
using stage::checkpoint_step_manifest;
using stage::SafetensorsFile;
using testing::LauncherProcess;

std::string fables_job(int steps, const std::string& checkpoint = "{interval: 1, resume: true}") {
  const std::string examples = std::string(TESSEL_SOURCE_DIR) + "/examples";
  return "format_version: 1\n"
         "name: fables\n"
         "topology: {file: " +
         examples + "/local/two-sites.yaml}\n" +
         "model: {layers: 4, hidden: 128, heads: 4, seq_len: 64}\n"
         "training: {steps: " +
         std::to_string(steps) +
         ", micro_batch: 4, global_batch: 16, learning_rate: 3.0e-3, seed: 1337}\n"
         "data: {text: " +
         examples + "/data/fables.txt}\n" +
         "pipeline: {stages: 2, replicas: 2}\n"
         "placement: {evaluations: 200}\n"
         "timeouts: {connect_s: 30, io_s: 30}\n"
         "checkpoint: " +
         checkpoint + "\n";
}

std::string job_file(const fs::path& folder, const std::string& text) {
  const fs::path path = folder / "job.yaml";
  stage::testing::write_all(path.string(), text);
  return path.string();
}

// The launcher's error line: "tessel local: error: ..." when a stage process failed, "tessel:
// error: ..." when the launcher refused the checkpoint before starting any. "" when none.
std::string error_line(const std::string& output) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("tessel local: error: ", 0) == 0 || line.rfind("tessel: error: ", 0) == 0) {
      return line;
    }
  }
  return "";
}

class CheckpointDamage : public ::testing::Test {
 protected:
  // One good run of 3 steps for every case.
  static void SetUpTestSuite() {
    base_ = fs::temp_directory_path() / ("tessel-ckpt-damage-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_);
    LauncherProcess launcher(
        {"local", job_file(base_, fables_job(3)), "--output", (base_ / "out").string()});
    base_status_ = launcher.finish(300s);
    base_output_ = launcher.output();
    LauncherProcess whole(
        {"local", job_file(base_, fables_job(5)), "--output", (base_ / "whole").string()});
    whole_status_ = whole.finish(300s);
    whole_output_ = whole.output();
  }
  static void TearDownTestSuite() { fs::remove_all(base_); }

  void SetUp() override {
    ASSERT_EQ(base_status_, 0) << base_output_;
    ASSERT_EQ(whole_status_, 0) << whole_output_;
    dir_ = base_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy(base_ / "out", dir_ / "out", fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ckpt() const { return (dir_ / "out" / "checkpoints").string(); }
  std::string rank_file(int rank) const { return checkpoint_rank_file(ckpt(), 3, rank); }

  // Resumes the damaged checkpoint to step 5: it must fail cleanly, its error line naming every
  // one of `parts`, and leave every checkpoint file as it was. Returns the launcher's output.
  std::string expect_refused(const std::vector<std::string>& parts) {
    const auto before = stage::testing::snapshot(ckpt());
    LauncherProcess launcher(
        {"local", job_file(dir_, fables_job(5)), "--output", (dir_ / "out").string()});
    const int status = launcher.finish(300s);
    EXPECT_EQ(status, 1) << launcher.output();
    const std::string& out = launcher.output();
    const std::string error = error_line(out);
    EXPECT_NE(error, "") << out;
    for (const std::string& part : parts) {
      EXPECT_NE(error.find(part), std::string::npos) << "missing '" << part << "' in\n" << out;
    }
    EXPECT_EQ(out.find("step 4/5"), std::string::npos) << "trained from a damaged state\n" << out;
    const auto after = stage::testing::snapshot(ckpt());
    EXPECT_EQ(after.size(), before.size());
    for (const auto& [path, text] : before) {
      EXPECT_TRUE(after.count(path) && after.at(path) == text) << path << " was changed";
    }
    return out;
  }

  // Resumes the damaged checkpoint to step 5: it must resume from `from`, say that it skipped
  // what each of `skipped` names (on its output and in report.md), and print the uninterrupted
  // run's losses for the steps after `from`.
  void expect_resumed(int64_t from, const std::vector<std::string>& skipped) {
    LauncherProcess launcher(
        {"local", job_file(dir_, fables_job(5)), "--output", (dir_ / "out").string()});
    ASSERT_EQ(launcher.finish(300s), 0) << launcher.output();
    const std::string& out = launcher.output();
    const std::string said = "tessel local: resumed from the checkpoint of step " +
                             std::to_string(from) + ", skipping (each rank's log in ";
    ASSERT_NE(out.find(said), std::string::npos) << out;
    const std::string skips = out.substr(out.find(said));
    const std::string report = stage::testing::read_all((dir_ / "out" / "report.md").string());
    for (const std::string& part : skipped) {
      EXPECT_NE(skips.find(part), std::string::npos) << "missing '" << part << "' in\n" << out;
      EXPECT_NE(report.find(part), std::string::npos) << "missing '" << part << "' in\n" << report;
    }
    EXPECT_NE(report.find("Skipped on resuming"), std::string::npos) << report;
    EXPECT_NE(out.find("resumed from step " + std::to_string(from) + ", in "), std::string::npos)
        << out;
    EXPECT_EQ(out.find("step " + std::to_string(from) + "/5  loss"), std::string::npos) << out;
    for (int64_t step = from + 1; step <= 5; ++step) {
      const std::string line = progress_line(whole_output_, step);
      ASSERT_NE(line, "") << whole_output_;
      EXPECT_EQ(progress_line(out, step), line) << out;
    }
  }

  // "step N/5  loss L" of an output: the step and its loss as the launcher prints them.
  static std::string progress_line(const std::string& output, int64_t step) {
    const std::string head = "step " + std::to_string(step) + "/5  loss ";
    const size_t at = output.find(head);
    if (at == std::string::npos) return "";
    return output.substr(at, output.find("  ", at + head.size()) - at);
  }

  static inline fs::path base_;
  static inline int base_status_ = -1;
  static inline std::string base_output_;
  static inline int whole_status_ = -1;
  static inline std::string whole_output_;
  fs::path dir_;
};

TEST_F(CheckpointDamage, AFloatFlippedTo1e30IsSkippedAndTheReplicasFileOfTheStepServes) {
  stage::testing::overwrite_float(rank_file(1), "h.2.attn.proj.weight", 7, 1e30f);
  expect_resumed(
      3, {"step 3: " + rank_file(1) + ": tensor 'h.2.attn.proj.weight': checksum mismatch"});
}

TEST_F(CheckpointDamage, BothReplicasFilesOfAStageDamagedCostTheStep) {
  stage::testing::overwrite_float(rank_file(1), "h.2.attn.proj.weight", 7, 1e30f);
  stage::testing::overwrite_float(rank_file(3), "lm_head.weight", 3, 1e30f);
  expect_resumed(2, {"step 3: " + rank_file(1) + ": tensor 'h.2.attn.proj.weight': checksum",
                     "step 3: " + rank_file(3) + ": tensor 'lm_head.weight': checksum"});
}

TEST_F(CheckpointDamage, AnEditedDataPositionIsSkippedNamingIt) {
  SafetensorsFile file = stage::read_safetensors(rank_file(2));
  file.metadata["data_position"] =
      std::to_string(std::stoll(file.metadata.at("data_position")) + 16);
  stage::write_safetensors(rank_file(2), file);
  expect_resumed(3, {"step 3: " + rank_file(2) + ": metadata 'data_position' is", "(rank 2)"});
}

TEST_F(CheckpointDamage, ADataPositionEditedInTheManifestsTooCostsTheStep) {
  SafetensorsFile file = stage::read_safetensors(rank_file(2));
  const int64_t position = std::stoll(file.metadata.at("data_position")) + 16;
  file.metadata["data_position"] = std::to_string(position);
  stage::write_safetensors(rank_file(2), file);
  for (const std::string& path :
       {checkpoint_manifest(ckpt()), checkpoint_step_manifest(ckpt(), 3)}) {
    auto manifest = nlohmann::ordered_json::parse(stage::testing::read_all(path));
    manifest["data_position"] = position;
    stage::testing::write_all(path, manifest.dump(2) + "\n");
  }
  stage::testing::match_manifests_to_rank_file(ckpt(), 3, 2);
  // The manifest now disagrees with every other rank's file; rank 2's file agrees with it, and
  // its metadata checksum does not: no file of step 3 verifies.
  expect_resumed(2, {rank_file(2) + ": metadata checksum mismatch",
                     rank_file(1) + ": metadata 'data_position' is"});
}

TEST_F(CheckpointDamage, ADeletedManifestCostsTheNewestStepNamingIt) {
  fs::remove(checkpoint_manifest(ckpt()));
  expect_resumed(2, {"step 3: " + checkpoint_manifest(ckpt()) +
                     ": missing; it commits the newest step, which is therefore not used"});
}

TEST_F(CheckpointDamage, ADeletedStepManifestCostsTheStepNamingIt) {
  fs::remove(checkpoint_step_manifest(ckpt(), 3));
  expect_resumed(2, {"step 3: " + checkpoint_step_manifest(ckpt(), 3) +
                     ": missing: a save that did not finish"});
}

TEST_F(CheckpointDamage, ANanWrittenWithValidChecksumsIsSkippedNamingTheTensor) {
  SafetensorsFile file = stage::read_safetensors(rank_file(1));
  auto& data = file.tensors.at("h.3.mlp.fc.weight").data;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(data.data() + 11 * sizeof(float), &nan, sizeof nan);
  stage::testing::forge_rank_file(ckpt(), 3, 1, file);
  expect_resumed(
      3, {"step 3: " + rank_file(1) + ": tensor 'h.3.mlp.fc.weight' holds nan at element 11"});
}

TEST_F(CheckpointDamage, NoVerifiedStateOfAStageLeftIsRefusedNamingItAndEveryFault) {
  // A NaN with valid checksums in every file of stage 1 (ranks 1 and 3) of every step.
  for (int64_t step = 1; step <= 3; ++step) {
    for (int rank : {1, 3}) {
      SafetensorsFile file = stage::read_safetensors(checkpoint_rank_file(ckpt(), step, rank));
      auto& data = file.tensors.at("h.3.mlp.fc.weight").data;
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(data.data() + 11 * sizeof(float), &nan, sizeof nan);
      stage::testing::forge_rank_file(ckpt(), step, rank, file);
    }
  }
  expect_refused(
      {"no checkpoint step at which every stage has a verified state "
       "(checkpoint.shared: true, " +
       ckpt() + "): no rank holds a state of stage 1"});
}

TEST_F(CheckpointDamage, ATruncatedRankFileIsSkippedNamingIt) {
  const std::string bytes = stage::testing::read_all(rank_file(3));
  stage::testing::write_all(rank_file(3), bytes.substr(0, bytes.size() / 2));
  expect_resumed(3, {"step 3: " + rank_file(3) + ": " + std::to_string(bytes.size() / 2) + " bytes",
                     "(rank 3)"});
}

TEST_F(CheckpointDamage, AMissingRankFileIsSkippedNamingIt) {
  fs::remove(rank_file(0));
  expect_resumed(3, {"step 3: " + rank_file(0) + ": missing (", "(rank 0)"});
}

TEST_F(CheckpointDamage, AnotherReplicasFileInItsPlaceIsSkippedNamingIt) {
  fs::copy_file(rank_file(1), rank_file(3), fs::copy_options::overwrite_existing);
  SafetensorsFile file = stage::read_safetensors(rank_file(3));
  stage::testing::forge_rank_file(ckpt(), 3, 3, file);
  expect_resumed(3, {"step 3: " + rank_file(3) + ": metadata 'replica' is '0', this rank has '1'"});
}

TEST_F(CheckpointDamage, AnOldFormatCheckpointIsRefusedSayingSo) {
  fs::remove(checkpoint_manifest(ckpt()));
  for (int step = 1; step <= 3; ++step) {
    const std::string path = checkpoint_step_manifest(ckpt(), step);
    auto manifest = nlohmann::ordered_json::parse(stage::testing::read_all(path));
    manifest["format"] = "tessel-stage-checkpoint-1";
    stage::testing::write_all(path, manifest.dump(2) + "\n");
  }
  expect_refused({"format 'tessel-stage-checkpoint-1'", "without checksums"});
}

TEST_F(CheckpointDamage, AnUnreadableManifestCostsTheNewestStepNamingIt) {
  stage::testing::write_all(checkpoint_manifest(ckpt()), "{\"format\": \"tessel-stage-che");
  expect_resumed(2, {"step 3: " + checkpoint_manifest(ckpt()) + ": not valid JSON"});
}

TEST_F(CheckpointDamage, ATornNewerStepFolderIsIgnored) {
  // A save of step 4 that never finished: its rank files, no manifest.
  fs::create_directories(stage::checkpoint_step_dir(ckpt(), 4));
  for (int rank = 0; rank < 4; ++rank) {
    fs::copy_file(rank_file(rank), checkpoint_rank_file(ckpt(), 4, rank));
  }
  LauncherProcess launcher(
      {"local", job_file(dir_, fables_job(5)), "--output", (dir_ / "out").string()});
  ASSERT_EQ(launcher.finish(300s), 0) << launcher.output();
  EXPECT_NE(launcher.output().find("step 4: " + checkpoint_step_manifest(ckpt(), 4) +
                                   ": missing: a save that did not finish"),
            std::string::npos)
      << launcher.output();
  EXPECT_EQ(launcher.output().find("step 3/5"), std::string::npos) << launcher.output();
  EXPECT_NE(launcher.output().find("step 4/5"), std::string::npos) << launcher.output();
  EXPECT_EQ(stage::latest_checkpoint(ckpt()), 5);
  // The torn step 4 was replaced by the real one, and the default keep (3) pruned step 1 and 2.
  EXPECT_TRUE(fs::exists(checkpoint_step_manifest(ckpt(), 4)));
  EXPECT_FALSE(fs::exists(stage::checkpoint_step_dir(ckpt(), 2)));
  EXPECT_TRUE(fs::exists(stage::checkpoint_step_dir(ckpt(), 3)));
}

TEST_F(CheckpointDamage, KeepTwoLeavesTwoStepFoldersAfterTwentySteps) {
  const fs::path out = dir_ / "fresh";
  LauncherProcess launcher({"local",
                            job_file(dir_, fables_job(20, "{interval: 1, resume: true, keep: 2}")),
                            "--output", out.string()});
  ASSERT_EQ(launcher.finish(300s), 0) << launcher.output();
  std::vector<std::string> folders;
  for (const auto& entry : fs::directory_iterator(out / "checkpoints")) {
    folders.push_back(entry.path().filename().string());
  }
  std::sort(folders.begin(), folders.end());
  EXPECT_EQ(folders, (std::vector<std::string>{"manifest.json", "step-00000019", "step-00000020"}));
}

TEST_F(CheckpointDamage, AFullDiskDuringASaveNamesTheFileAndKeepsThePreviousCheckpoint) {
  const auto before = stage::testing::snapshot(ckpt());
  // The launcher and its stage processes inherit a 1 MiB file-size limit (a rank file is about
  // 5 MB) and an ignored SIGXFSZ, so the first save of the resumed run fails with EFBIG.
  tessel::testing::FullDisk full(1 << 20);
  LauncherProcess launcher(
      {"local", job_file(dir_, fables_job(5)), "--output", (dir_ / "out").string()});
  full.restore();
  EXPECT_EQ(launcher.finish(300s), 1) << launcher.output();
  const std::string& out = launcher.output();
  const std::string error = error_line(out);
  EXPECT_NE(error.find("checkpoint step 4: " + ckpt() + "/step-00000004/rank-0000"),
            std::string::npos)
      << out;
  EXPECT_NE(error.find(".safetensors: cannot write: File too large"), std::string::npos) << out;
  EXPECT_EQ(stage::latest_checkpoint(ckpt()), 3);
  const auto after = stage::testing::snapshot(ckpt());
  for (const auto& [path, text] : before) {
    EXPECT_TRUE(after.count(path) && after.at(path) == text) << path << " was changed";
  }
  for (const auto& [path, text] : after) EXPECT_TRUE(before.count(path)) << "left: " << path;
}

TEST(CheckpointKeep, TheLocalJobFileTakesKeepAtLeastOne) {
  const LocalJob job = parse_local_job(fables_job(5, "{interval: 2, keep: 5}"), "job.yaml", "/");
  EXPECT_EQ(job.checkpoint_keep, 5);
  EXPECT_EQ(parse_local_job(fables_job(5, "{interval: 2}"), "job.yaml", "/").checkpoint_keep, 3);
  try {
    parse_local_job(fables_job(5, "{interval: 2, keep: 0}"), "job.yaml", "/");
    FAIL() << "keep: 0 accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.keep: must be in [1, "), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessel::launcher
