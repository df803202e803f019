// Checkpoints: a run stopped after a few steps and resumed from its checkpoint (new processes'
// worth of state: new communicators, new runtimes) continues with bit-identical losses and
// weights; <dir>/manifest.json names the current step (a torn step folder is ignored; past a
// missing, torn or edited manifest latest_checkpoint gives the newest committed step); the
// inventory of a shared dir serves a rank whose file is damaged or missing from its replica's
// file, naming what it skipped; every tensor, the metadata and
// each rank file carry checksums verified on load, and a flipped value, an edited
// data_position, a non-finite value (even with matching checksums), another stage's file or an
// old format is refused naming the file and the tensor or field; old step folders are pruned;
// a write that fails (a full disk) names the file and the cause and leaves the previous
// checkpoint intact.
#include "noderuntime/stage/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "checkpoint_damage.h"
#include "noderuntime/stage/safetensors.h"
#include "stage_test_support.h"
#include "tests/full_disk.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using placement::ScheduleKind;
using testing::read_all;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class Checkpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-stage-ckpt-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir() const { return dir_.string(); }

  // Trains `steps` steps and saves a checkpoint after each.
  void save_steps(int steps, CheckpointPruning pruning = {}) {
    testing::RunHooks save;
    save.after_step = [&](StageRuntime& runtime, transport::Communicator& comm, int) {
      save_checkpoint(dir(), runtime, comm, pruning);
    };
    testing::run_pipeline(config_, layout_, options_, steps, save);
  }

  // Every rank's error loading the checkpoint of `step` ("" when it loaded).
  std::vector<std::string> load_errors(int64_t step) {
    std::vector<std::string> errors(layout_.world_size());
    testing::RunHooks load;
    load.before = [&](StageRuntime& runtime, transport::Communicator&) {
      try {
        load_checkpoint(dir(), step, runtime);
      } catch (const SafetensorsError& e) {
        errors[runtime.rank()] = e.what();
      }
    };
    testing::run_pipeline(config_, layout_, options_, 0, load);
    return errors;
  }

  std::vector<int64_t> folders() const {
    std::vector<int64_t> steps;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("step-", 0) == 0) steps.push_back(std::stoll(name.substr(5)));
    }
    std::sort(steps.begin(), steps.end());
    return steps;
  }

  fs::path dir_;
  const GptConfig config_ = testing::tiny_config(4);
  const PipelineLayout layout_ = PipelineLayout::standard(2, 2, 1, 4);
  const TrainingOptions options_ = testing::tiny_options(ScheduleKind::OneFOneB, 2);
};

TEST_F(Checkpoints, ResumeGivesBitIdenticalLossesAndWeights) {
  constexpr int kSteps = 5, kStopAt = 2;
  const testing::RunResult whole = testing::run_pipeline(config_, layout_, options_, kSteps);

  save_steps(kStopAt);
  ASSERT_EQ(latest_checkpoint(dir()), kStopAt);

  testing::RunHooks resume;
  resume.before = [&](StageRuntime& runtime, transport::Communicator&) {
    load_checkpoint(dir(), kStopAt, runtime);
    EXPECT_EQ(runtime.steps_done(), kStopAt);
  };
  const testing::RunResult resumed =
      testing::run_pipeline(config_, layout_, options_, kSteps - kStopAt, resume);
  for (int rank = 0; rank < layout_.world_size(); ++rank) {
    for (int s = kStopAt; s < kSteps; ++s) {
      EXPECT_EQ(resumed.losses[rank][s - kStopAt], whole.losses[rank][s])
          << "rank " << rank << " step " << s;
    }
  }
  for (int r = 0; r < layout_.replicas; ++r) {
    for (const auto& [name, values] : whole.weights[r]) {
      EXPECT_EQ(resumed.weights[r].at(name), values) << name;
    }
  }
}

TEST_F(Checkpoints, TheTopManifestNamesTheCurrentStepAndListsEveryFile) {
  EXPECT_EQ(latest_checkpoint(dir()), std::nullopt);  // no folder at all: no checkpoint yet
  save_steps(2);
  EXPECT_EQ(latest_checkpoint(dir()), 2);
  const std::string top = read_all(checkpoint_manifest(dir()));
  EXPECT_EQ(top, read_all(checkpoint_step_manifest(dir(), 2)));
  const auto manifest = nlohmann::json::parse(top);
  EXPECT_EQ(manifest["format"], "tessel-stage-checkpoint-2");
  EXPECT_EQ(manifest["step"], 2);
  EXPECT_EQ(manifest["data_position"], 16);
  ASSERT_EQ(manifest["files"].size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    const auto& entry = manifest["files"][rank];
    const std::string path = checkpoint_rank_file(dir(), 2, rank);
    EXPECT_EQ(entry["file"], "step-00000002/rank-0000" + std::to_string(rank) + ".safetensors");
    const std::string bytes = read_all(path);
    EXPECT_EQ(entry["bytes"], bytes.size());
    EXPECT_EQ(entry["crc32c"],
              crc_hex(transport::crc32c(std::as_bytes(std::span(bytes.data(), bytes.size())))));
  }
}

TEST_F(Checkpoints, RankFilesHoldWeightsMomentsAndPosition) {
  save_steps(1);
  // Rank 1 is stage 1 of replica 0 in the standard layout: the last stage.
  const SafetensorsFile file = read_safetensors(checkpoint_rank_file(dir(), 1, 1));
  EXPECT_EQ(file.metadata.at("stage"), "1");
  EXPECT_EQ(file.metadata.at("replica"), "0");
  EXPECT_EQ(file.metadata.at("step"), "1");
  // One step read D x m x B = 2 x 2 x 2 sequences.
  EXPECT_EQ(file.metadata.at("data_position"), "8");
  EXPECT_TRUE(file.tensors.count("lm_head.weight"));
  EXPECT_TRUE(file.tensors.count("lm_head.weight.adam_v"));
  EXPECT_TRUE(file.tensors.count("h.3.mlp.fc.weight.adam_m"));
  EXPECT_FALSE(file.tensors.count("wte.weight"));
  EXPECT_EQ(file.tensors.at("h.2.attn.qkv.weight").shape, (std::vector<int64_t>{96, 32}));
  // Every tensor has its checksum, and the metadata one of its own.
  for (const auto& [name, tensor] : file.tensors) {
    EXPECT_TRUE(file.metadata.count("crc32c:" + name)) << name;
  }
  EXPECT_TRUE(file.metadata.count("metadata_crc32c"));
}

TEST_F(Checkpoints, ATornStepFolderIsIgnoredAndNeverUsed) {
  save_steps(2);
  // A save of step 3 that never finished: rank files, no manifest.
  fs::create_directories(checkpoint_step_dir(dir(), 3));
  for (int rank = 0; rank < 4; ++rank) {
    fs::copy_file(checkpoint_rank_file(dir(), 2, rank), checkpoint_rank_file(dir(), 3, rank));
  }
  EXPECT_EQ(latest_checkpoint(dir()), 2);
  // A folder with only torn saves holds no checkpoint yet.
  const fs::path only_torn = dir_ / "only-torn";
  fs::create_directories(only_torn / "step-00000001");
  fs::copy_file(checkpoint_rank_file(dir(), 2, 0),
                only_torn / "step-00000001" / "rank-00000.safetensors");
  EXPECT_EQ(latest_checkpoint(only_torn.string()), std::nullopt);
}

TEST_F(Checkpoints, AMissingTornOrEditedManifestFallsBackToTheNewestCommittedStep) {
  save_steps(3);
  const std::string top = checkpoint_manifest(dir());
  const std::string kept = read_all(top);
  fs::remove(top);
  EXPECT_EQ(latest_checkpoint(dir()), 2);  // without it step 3 is not known to be committed
  testing::write_all(top, "{\"format\": ");
  EXPECT_EQ(latest_checkpoint(dir()), 2);
  testing::write_all(top, kept + " ");  // edited: it and step 3's manifest differ
  EXPECT_EQ(latest_checkpoint(dir()), 2);
  testing::write_all(top, kept);
  EXPECT_EQ(latest_checkpoint(dir()), 3);

  const std::string step_manifest = checkpoint_step_manifest(dir(), 3);
  fs::remove(step_manifest);
  EXPECT_EQ(latest_checkpoint(dir()), 2);
  // Loading the step directly names it.
  for (const std::string& e : load_errors(3)) EXPECT_TRUE(contains(e, step_manifest)) << e;
  // The only committed step gone: none is.
  fs::remove_all(checkpoint_step_dir(dir(), 1));
  fs::remove_all(checkpoint_step_dir(dir(), 2));
  EXPECT_EQ(latest_checkpoint(dir()), std::nullopt);
}

TEST_F(Checkpoints, TheInventoryOfASharedDirServesADamagedFileFromTheReplicasFile) {
  save_steps(2);
  const std::string rank1 = checkpoint_rank_file(dir(), 2, 1);
  testing::overwrite_float(rank1, "lm_head.weight", 0, 2.0f);
  const std::string rank0 = checkpoint_rank_file(dir(), 2, 0);
  fs::remove(rank0);
  std::vector<std::string> lines(layout_.world_size());
  std::vector<std::vector<StoredState>> usable(layout_.world_size());
  testing::RunHooks take;
  take.before = [&](StageRuntime& runtime, transport::Communicator&) {
    std::ostringstream err;
    usable[runtime.rank()] =
        inventory_states(dir(), runtime, err, "rank " + std::to_string(runtime.rank()),
                         CheckpointDirs::kShared)
            .usable;
    lines[runtime.rank()] = err.str();
  };
  testing::run_pipeline(config_, layout_, options_, 0, take);
  for (int rank = 0; rank < layout_.world_size(); ++rank) {
    ASSERT_EQ(usable[rank].size(), 2u) << rank;
    EXPECT_EQ(usable[rank][0].step, 2);
    EXPECT_EQ(usable[rank][1].path, checkpoint_rank_file(dir(), 1, rank));
  }
  // Ranks 0 and 1 (replica 0 of stages 0 and 1) load replica 1's file of step 2.
  EXPECT_EQ(usable[0][0].path, checkpoint_rank_file(dir(), 2, 2));
  EXPECT_EQ(usable[1][0].path, checkpoint_rank_file(dir(), 2, 3));
  EXPECT_EQ(usable[2][0].path, checkpoint_rank_file(dir(), 2, 2));
  EXPECT_EQ(usable[3][0].path, checkpoint_rank_file(dir(), 2, 3));
  EXPECT_EQ(lines[0], "rank 0: resume: skipping step 2: " + rank0 + ": missing (" +
                          checkpoint_step_manifest(dir(), 2) + " lists it)\n");
  EXPECT_TRUE(contains(lines[1], "rank 1: resume: skipping step 2: " + rank1 +
                                     ": tensor 'lm_head.weight': checksum mismatch"))
      << lines[1];
  EXPECT_EQ(lines[2], "");
  EXPECT_EQ(lines[3], "");
}

TEST_F(Checkpoints, AFlippedFloatIsAChecksumErrorNamingFileAndTensor) {
  save_steps(1);
  const std::string rank1 = checkpoint_rank_file(dir(), 1, 1);
  testing::overwrite_float(rank1, "h.2.attn.qkv.weight", 17, 1e30f);
  const auto errors = load_errors(1);
  EXPECT_TRUE(contains(errors[1], rank1 + ": tensor 'h.2.attn.qkv.weight': checksum mismatch"))
      << errors[1];
  EXPECT_EQ(errors[0], "");
  // The same flip with the tensor's checksum fixed up: the metadata checksum catches it; with
  // that fixed too, the file's checksum in the manifest does.
  SafetensorsFile file = read_safetensors(rank1);
  file.metadata["crc32c:h.2.attn.qkv.weight"] =
      crc_hex(transport::crc32c(file.tensors.at("h.2.attn.qkv.weight").data));
  write_safetensors(rank1, file);
  EXPECT_TRUE(contains(load_errors(1)[1], rank1 + ": metadata checksum mismatch"));
  file.metadata["metadata_crc32c"] = crc_hex(metadata_digest(file.metadata));
  write_safetensors(rank1, file);
  const std::string error = load_errors(1)[1];
  EXPECT_TRUE(
      contains(error, rank1 + ": checksum mismatch with " + checkpoint_step_manifest(dir(), 1)))
      << error;
}

TEST_F(Checkpoints, AnEditedDataPositionIsDetected) {
  save_steps(1);
  const std::string rank2 = checkpoint_rank_file(dir(), 1, 2);
  SafetensorsFile file = read_safetensors(rank2);
  ASSERT_EQ(file.metadata.at("data_position"), "8");
  file.metadata["data_position"] = "9";
  write_safetensors(rank2, file);
  std::string error = load_errors(1)[2];
  EXPECT_TRUE(contains(error, rank2 + ": metadata 'data_position' is '9', " +
                                  checkpoint_step_manifest(dir(), 1) + " says '8'"))
      << error;
  // The rank file and both manifests agree on the lie: the metadata checksum does not.
  for (const std::string& path : {checkpoint_manifest(dir()), checkpoint_step_manifest(dir(), 1)}) {
    auto manifest = nlohmann::ordered_json::parse(read_all(path));
    manifest["data_position"] = 9;
    testing::write_all(path, manifest.dump(2) + "\n");
  }
  testing::match_manifests_to_rank_file(dir(), 1, 2);
  error = load_errors(1)[2];
  EXPECT_TRUE(contains(error, rank2 + ": metadata checksum mismatch")) << error;
}

TEST_F(Checkpoints, ANonFiniteValueWithMatchingChecksumsIsRefusedNamingTheTensor) {
  save_steps(1);
  const std::string rank1 = checkpoint_rank_file(dir(), 1, 1);
  SafetensorsFile file = read_safetensors(rank1);
  auto& data = file.tensors.at("h.3.mlp.fc.weight.adam_v").data;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(data.data() + 5 * sizeof(float), &nan, sizeof nan);
  testing::forge_rank_file(dir(), 1, 1, file);
  EXPECT_EQ(latest_checkpoint(dir()), 1);
  const auto errors = load_errors(1);
  EXPECT_TRUE(contains(errors[1], rank1 + ": tensor 'h.3.mlp.fc.weight.adam_v' holds nan at "
                                          "element 5"))
      << errors[1];
  for (int rank : {0, 2, 3}) EXPECT_EQ(errors[rank], "") << rank;
}

TEST_F(Checkpoints, SavingANonFiniteStateIsRefusedNamingRankAndTensor) {
  save_steps(1);
  std::vector<std::string> errors(4);
  testing::RunHooks save;
  save.after_step = [&](StageRuntime& runtime, transport::Communicator& comm, int) {
    runtime.chunks()[0]->model.state_for_writing().params[3] =
        std::numeric_limits<float>::infinity();
    runtime.chunks()[0]->model.state_written();
    errors[runtime.rank()] = error_of([&] { save_checkpoint(dir(), runtime, comm); });
  };
  testing::run_pipeline(config_, layout_, options_, 1, save);
  EXPECT_TRUE(contains(errors[1], "checkpoint step 1: rank 1 (stage 1 replica 0): tensor '"))
      << errors[1];
  EXPECT_TRUE(contains(errors[1], "holds inf at element")) << errors[1];
  EXPECT_EQ(latest_checkpoint(dir()), 1);  // nothing written
}

TEST_F(Checkpoints, LoadingRejectsAnotherStagesFileAndAWrongShape) {
  save_steps(1);
  const std::string rank0 = checkpoint_rank_file(dir(), 1, 0);
  const std::string rank1 = checkpoint_rank_file(dir(), 1, 1);

  // Rank 1's file in rank 0's place, the manifest matched to it: the metadata says which field
  // differs.
  fs::copy_file(rank1, rank0, fs::copy_options::overwrite_existing);
  testing::match_manifests_to_rank_file(dir(), 1, 0);
  auto errors = load_errors(1);
  EXPECT_TRUE(contains(errors[0], rank0 + ": metadata 'stage' is '1', this rank has '0'"))
      << errors[0];
  EXPECT_EQ(errors[1], "");

  // A tensor with the wrong shape is named.
  SafetensorsFile file = read_safetensors(rank1);
  const std::vector<float> small(32, 0.0f);
  file.add_f32("h.3.mlp.fc.bias", {32}, small.data());
  testing::forge_rank_file(dir(), 1, 1, file);
  errors = load_errors(1);
  EXPECT_TRUE(contains(errors[1], "tensor 'h.3.mlp.fc.bias': shape [32], expected [128]"))
      << errors[1];
}

TEST_F(Checkpoints, TruncatedMissingOrReplacedRankFilesAreNamed) {
  save_steps(1);
  const std::string manifest = checkpoint_step_manifest(dir(), 1);
  const std::string rank3 = checkpoint_rank_file(dir(), 1, 3);
  const std::string bytes = read_all(rank3);
  testing::write_all(rank3, bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(contains(load_errors(1)[3], rank3 + ": " + std::to_string(bytes.size() / 2) +
                                              " bytes, " + manifest + " says " +
                                              std::to_string(bytes.size())));
  fs::remove(rank3);
  EXPECT_TRUE(contains(load_errors(1)[3], rank3 + ": missing (" + manifest + " lists it)"));
}

TEST_F(Checkpoints, OldCheckpointsWithoutChecksumsAreRefusedSayingSo) {
  save_steps(1);
  // An old checkpoint: format 1, no top manifest.
  auto manifest = nlohmann::ordered_json::parse(read_all(checkpoint_step_manifest(dir(), 1)));
  manifest["format"] = "tessel-stage-checkpoint-1";
  testing::write_all(checkpoint_step_manifest(dir(), 1), manifest.dump(2));
  fs::remove(checkpoint_manifest(dir()));
  std::string error = error_of([&] { latest_checkpoint(dir()); });
  EXPECT_TRUE(contains(error, checkpoint_step_manifest(dir(), 1) +
                                  ": a checkpoint of format 'tessel-stage-checkpoint-1', written "
                                  "by an older tessel without checksums"))
      << error;
  // An old rank file under a new manifest.
  fs::remove_all(dir_);
  save_steps(1);
  const std::string rank0 = checkpoint_rank_file(dir(), 1, 0);
  SafetensorsFile file = read_safetensors(rank0);
  file.metadata["format"] = "tessel-stage-checkpoint-1";
  for (auto it = file.metadata.begin(); it != file.metadata.end();) {
    it = it->first.find("crc32c") != std::string::npos ? file.metadata.erase(it) : std::next(it);
  }
  write_safetensors(rank0, file);
  testing::match_manifests_to_rank_file(dir(), 1, 0);
  error = load_errors(1)[0];
  EXPECT_TRUE(contains(error, rank0 + ": a checkpoint of format 'tessel-stage-checkpoint-1'"))
      << error;
}

TEST_F(Checkpoints, AManifestWithANumberNoDoubleHoldsIsPassedOverLikeATornOne) {
  save_steps(2);
  // nlohmann::json throws out_of_range, not parse_error, for 1e400 (found by tests/fuzz): it
  // must count as an unreadable manifest, not escape as another exception.
  const std::string bad = R"({"format": "tessel-stage-checkpoint-2", "step": 1e400})";
  testing::write_all(checkpoint_step_manifest(dir(), 2), bad);
  testing::write_all(checkpoint_manifest(dir()), bad);
  std::optional<int64_t> latest;
  EXPECT_NO_THROW(latest = latest_checkpoint(dir()));
  EXPECT_EQ(latest, 1);
}

TEST_F(Checkpoints, KeepTwoLeavesTwoStepFolders) {
  save_steps(20, {2, std::nullopt});
  EXPECT_EQ(folders(), (std::vector<int64_t>{19, 20}));
  EXPECT_EQ(latest_checkpoint(dir()), 20);
  for (const std::string& e : load_errors(20)) EXPECT_EQ(e, "");
}

TEST_F(Checkpoints, PruningKeepsTheStepResumedFromAndNothingNewer) {
  save_steps(3, {5, std::nullopt});
  // A torn folder newer than the current step stays (the next save of that step replaces it).
  fs::create_directories(checkpoint_step_dir(dir(), 9));
  prune_checkpoints(dir(), 3, {1, 1});
  EXPECT_EQ(folders(), (std::vector<int64_t>{1, 3, 9}));
  prune_checkpoints(dir(), 3, {1, std::nullopt});
  EXPECT_EQ(folders(), (std::vector<int64_t>{3, 9}));
  EXPECT_TRUE(contains(error_of([&] {
                         prune_checkpoints(dir(), 3, {0, std::nullopt});
                       }),
                       "at least 1"));
}

TEST_F(Checkpoints, AFullDiskNamesTheFileAndCauseAndKeepsThePreviousCheckpoint) {
  save_steps(1);
  const auto before = testing::snapshot(dir());
  std::vector<std::string> errors(4);
  {
    // Files may grow to 4 KiB: a rank file is larger.
    const tessel::testing::FullDisk full(4096);
    testing::RunHooks save;
    save.before = [&](StageRuntime& runtime, transport::Communicator&) {
      load_checkpoint(dir(), 1, runtime);
    };
    save.after_step = [&](StageRuntime& runtime, transport::Communicator& comm, int) {
      errors[runtime.rank()] = error_of([&] { save_checkpoint(dir(), runtime, comm); });
    };
    testing::run_pipeline(config_, layout_, options_, 1, save);
  }
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(
        contains(errors[rank], "checkpoint step 2: " + checkpoint_rank_file(dir(), 2, rank) +
                                   ": cannot write: File too large"))
        << errors[rank];
  }
  EXPECT_EQ(latest_checkpoint(dir()), 1);
  auto after = testing::snapshot(dir());
  for (const auto& [path, text] : before) EXPECT_EQ(after[path], text) << path;
  for (const auto& [path, text] : after) EXPECT_TRUE(before.count(path)) << "left behind: " << path;
  for (const std::string& e : load_errors(1)) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace tessel::stage
