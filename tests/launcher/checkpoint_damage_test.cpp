// Damaged checkpoints through real `tessel local` runs: the fables example shrunk to a few
// steps (checkpoint: {interval: 1, resume: true}) trains 3 steps once; each case copies that
// output folder, damages its checkpoint the way a disk, a person or a buggy run can, and resumes
// to step 5. Every damaged resume must end cleanly (exit 1, no signal), with the launcher's
// error naming the rank file (or manifest) at fault and what is wrong, and leave every
// checkpoint file as it was. A torn step folder is ignored; keep: 2 leaves two step folders; a
// full disk during a save names the file and the cause and keeps the previous checkpoint.
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
  }
  static void TearDownTestSuite() { fs::remove_all(base_); }

  void SetUp() override {
    ASSERT_EQ(base_status_, 0) << base_output_;
    dir_ = base_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy(base_ / "out", dir_ / "out", fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ckpt() const { return (dir_ / "out" / "checkpoints").string(); }
  std::string rank_file(int rank) const { return checkpoint_rank_file(ckpt(), 3, rank); }

  // Resumes the damaged checkpoint to step 5: it must fail cleanly, its error line naming every
  // one of `parts`, and leave every checkpoint file as it was.
  void expect_refused(const std::vector<std::string>& parts) {
    const auto before = stage::testing::snapshot(ckpt());
    LauncherProcess launcher(
        {"local", job_file(dir_, fables_job(5)), "--output", (dir_ / "out").string()});
    const int status = launcher.finish(300s);
    EXPECT_EQ(status, 1) << launcher.output();
    const std::string& out = launcher.output();
    const std::string error = error_line(out);
    ASSERT_NE(error, "") << out;
    for (const std::string& part : parts) {
      EXPECT_NE(error.find(part), std::string::npos) << "missing '" << part << "' in\n" << out;
    }
    EXPECT_EQ(out.find("step 4/5"), std::string::npos) << "trained from a damaged state\n" << out;
    const auto after = stage::testing::snapshot(ckpt());
    EXPECT_EQ(after.size(), before.size());
    for (const auto& [path, text] : before) {
      EXPECT_TRUE(after.count(path) && after.at(path) == text) << path << " was changed";
    }
  }

  static inline fs::path base_;
  static inline int base_status_ = -1;
  static inline std::string base_output_;
  fs::path dir_;
};

TEST_F(CheckpointDamage, AFloatFlippedTo1e30IsAChecksumErrorNamingFileAndTensor) {
  stage::testing::overwrite_float(rank_file(1), "h.2.attn.proj.weight", 7, 1e30f);
  expect_refused({"stage 1 replica 0 (rank 1)",
                  "step-00000003/rank-00001.safetensors: tensor "
                  "'h.2.attn.proj.weight': checksum mismatch"});
}

TEST_F(CheckpointDamage, AnEditedDataPositionIsNamed) {
  SafetensorsFile file = stage::read_safetensors(rank_file(2));
  file.metadata["data_position"] =
      std::to_string(std::stoll(file.metadata.at("data_position")) + 16);
  stage::write_safetensors(rank_file(2), file);
  expect_refused(
      {"stage 0 replica 1 (rank 2)", "rank-00002.safetensors: metadata 'data_position' is"});
}

TEST_F(CheckpointDamage, ADataPositionEditedInTheManifestsTooFailsTheMetadataChecksum) {
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
  // The manifest now disagrees with every other rank's file, which those ranks say; rank 2's
  // file agrees with it, and its metadata checksum does not. Every rank's error is its own, so
  // the blame may go to any of them; rank 2's log says what is wrong with its file.
  expect_refused({"/step-00000003/rank-0000", ".safetensors: metadata "});
  const std::string log = stage::testing::read_all((dir_ / "out" / "logs" / "rank-2.log").string());
  EXPECT_NE(log.find("rank-00002.safetensors: metadata checksum mismatch"), std::string::npos)
      << log;
}

TEST_F(CheckpointDamage, ADeletedManifestIsAnErrorNamingItNotAFallback) {
  fs::remove(checkpoint_manifest(ckpt()));
  expect_refused({checkpoint_manifest(ckpt()) + ": missing", "steps 1, 2, 3"});
}

TEST_F(CheckpointDamage, ADeletedStepManifestIsAnErrorNamingIt) {
  fs::remove(checkpoint_step_manifest(ckpt(), 3));
  expect_refused({checkpoint_step_manifest(ckpt(), 3) + ": missing"});
}

TEST_F(CheckpointDamage, ANanWrittenWithValidChecksumsIsBlamedOnItsRank) {
  SafetensorsFile file = stage::read_safetensors(rank_file(1));
  auto& data = file.tensors.at("h.3.mlp.fc.weight").data;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(data.data() + 11 * sizeof(float), &nan, sizeof nan);
  stage::testing::forge_rank_file(ckpt(), 3, 1, file);
  expect_refused({"stage 1 replica 0 (rank 1)",
                  "rank-00001.safetensors: tensor 'h.3.mlp.fc.weight' holds nan at element 11"});
}

TEST_F(CheckpointDamage, ATruncatedRankFileIsNamed) {
  const std::string bytes = stage::testing::read_all(rank_file(3));
  stage::testing::write_all(rank_file(3), bytes.substr(0, bytes.size() / 2));
  expect_refused({"stage 1 replica 1 (rank 3)",
                  "rank-00003.safetensors: " + std::to_string(bytes.size() / 2) + " bytes"});
}

TEST_F(CheckpointDamage, AMissingRankFileIsNamed) {
  fs::remove(rank_file(0));
  expect_refused({"stage 0 replica 0 (rank 0)", "rank-00000.safetensors: missing"});
}

TEST_F(CheckpointDamage, AnotherStagesFileIsNamed) {
  fs::copy_file(rank_file(1), rank_file(3), fs::copy_options::overwrite_existing);
  SafetensorsFile file = stage::read_safetensors(rank_file(3));
  stage::testing::forge_rank_file(ckpt(), 3, 3, file);
  expect_refused({"stage 1 replica 1 (rank 3)",
                  "rank-00003.safetensors: metadata 'replica' is '0', this rank has '1'"});
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

TEST_F(CheckpointDamage, AnUnreadableManifestIsNamed) {
  stage::testing::write_all(checkpoint_manifest(ckpt()), "{\"format\": \"tessel-stage-che");
  expect_refused({checkpoint_manifest(ckpt()) + ": not valid JSON"});
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
