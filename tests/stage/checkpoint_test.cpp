// Checkpoints: a run stopped after a few steps and resumed from its checkpoint (new processes'
// worth of state: new communicators, new runtimes) continues with bit-identical losses and
// weights; a checkpoint is complete only with its manifest; loading into the wrong rank or a
// corrupted file fails naming the file and the field or tensor.
#include "noderuntime/stage/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "noderuntime/stage/safetensors.h"
#include "stage_test_support.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using placement::ScheduleKind;

class Checkpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-stage-ckpt-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  const GptConfig config_ = testing::tiny_config(4);
  const PipelineLayout layout_ = PipelineLayout::standard(2, 2, 1, 4);
  const TrainingOptions options_ = testing::tiny_options(ScheduleKind::OneFOneB, 2);
};

TEST_F(Checkpoints, ResumeGivesBitIdenticalLossesAndWeights) {
  constexpr int kSteps = 5, kStopAt = 2;
  const testing::RunResult whole = testing::run_pipeline(config_, layout_, options_, kSteps);

  testing::RunHooks save;
  save.after_step = [&](StageRuntime& runtime, transport::Communicator& comm, int) {
    save_checkpoint(dir_.string(), runtime, comm);
  };
  testing::run_pipeline(config_, layout_, options_, kStopAt, save);
  ASSERT_EQ(latest_checkpoint(dir_.string()), kStopAt);

  testing::RunHooks resume;
  resume.before = [&](StageRuntime& runtime, transport::Communicator&) {
    load_checkpoint(dir_.string(), kStopAt, runtime);
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

TEST_F(Checkpoints, OnlyCheckpointsWithAManifestCount) {
  EXPECT_EQ(latest_checkpoint(dir_.string()), std::nullopt);  // no directory at all
  testing::RunHooks save;
  save.after_step = [&](StageRuntime& runtime, transport::Communicator& comm, int) {
    save_checkpoint(dir_.string(), runtime, comm);
  };
  testing::run_pipeline(config_, layout_, options_, 2, save);
  EXPECT_EQ(latest_checkpoint(dir_.string()), 2);
  fs::remove(fs::path(checkpoint_step_dir(dir_.string(), 2)) / "manifest.json");
  EXPECT_EQ(latest_checkpoint(dir_.string()), 1);
  const auto manifest = nlohmann::json::parse(
      std::ifstream(fs::path(checkpoint_step_dir(dir_.string(), 1)) / "manifest.json"));
  EXPECT_EQ(manifest["step"], 1);
  EXPECT_EQ(manifest["files"].size(), 4u);
  EXPECT_EQ(manifest["files"][3]["file"], "rank-00003.safetensors");
}

TEST_F(Checkpoints, RankFilesHoldWeightsMomentsAndPosition) {
  testing::RunHooks save;
  save.after_step = [&](StageRuntime& runtime, transport::Communicator& comm, int) {
    save_checkpoint(dir_.string(), runtime, comm);
  };
  testing::run_pipeline(config_, layout_, options_, 1, save);
  // Rank 1 is stage 1 of replica 0 in the standard layout: the last stage.
  const SafetensorsFile file = read_safetensors(checkpoint_rank_file(dir_.string(), 1, 1));
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
}

TEST_F(Checkpoints, LoadingRejectsAnotherStagesFileAndCorruption) {
  testing::RunHooks save;
  save.after_step = [&](StageRuntime& runtime, transport::Communicator& comm, int) {
    save_checkpoint(dir_.string(), runtime, comm);
  };
  testing::run_pipeline(config_, layout_, options_, 1, save);
  const std::string rank0 = checkpoint_rank_file(dir_.string(), 1, 0);
  const std::string rank1 = checkpoint_rank_file(dir_.string(), 1, 1);

  // Rank 0's runtime reading rank 1's file (stage 1): the metadata says which field differs.
  fs::copy_file(rank1, rank0, fs::copy_options::overwrite_existing);
  testing::RunHooks load;
  std::vector<std::string> errors(layout_.world_size());
  load.before = [&](StageRuntime& runtime, transport::Communicator&) {
    try {
      load_checkpoint(dir_.string(), 1, runtime);
    } catch (const SafetensorsError& e) {
      errors[runtime.rank()] = e.what();
    }
  };
  testing::run_pipeline(config_, layout_, options_, 0, load);
  EXPECT_NE(errors[0].find(rank0), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("metadata 'stage' is '1', this rank has '0'"), std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], "");

  // A tensor with the wrong shape is named.
  SafetensorsFile file = read_safetensors(rank1);
  const std::vector<float> small(32, 0.0f);
  file.add_f32("h.3.mlp.fc.bias", {32}, small.data());
  write_safetensors(rank1, file);
  errors.assign(layout_.world_size(), "");
  testing::run_pipeline(config_, layout_, options_, 0, load);
  EXPECT_NE(errors[1].find("tensor 'h.3.mlp.fc.bias': shape [32], expected [128]"),
            std::string::npos)
      << errors[1];
}

}  // namespace
}  // namespace tessel::stage
