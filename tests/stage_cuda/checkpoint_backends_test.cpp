// Checkpoints move between the stage runtime's backends unchanged: a single-rank runtime
// (P = D = 1 on a one-rank communicator) on one backend trains two steps and saves; a runtime on
// the other backend loads the checkpoint and holds bit for bit the same fp32 parameters and
// AdamW moments, at the same step and data position, and its next two steps' losses are the
// saving runtime's next ones within bf16's tolerance. Both ways: CUDA to CPU and CPU to CUDA. Built
// into both stage_cuda binaries (the SIMT emulator, and a GPU when there is one).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/device.h"
#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/cuda/gpt_chunk_cuda.h"
#include "tests/stage/stage_test_support.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;

// Head size 64 (hidden 128, 2 heads), as the CUDA attention needs; tiny otherwise.
GptConfig config() {
  return GptConfig{/*layers=*/2, /*channels=*/128, /*heads=*/2,
                   /*ffn=*/512,  /*seq_len=*/16,
                   /*vocab=*/256};
}

// The loss of a step computed from the same fp32 master weights by the two backends: the CUDA
// one rounds the matmul weights and every activation to bf16 (relative 2^-9 each, over about
// twenty ops a layer). cuda_backend_test.cpp bounds one micro-batch's loss at 1e-2 relative and
// its 3-step job at 5e-3; here the two stay about 2e-4 apart on the emulator. A checkpoint that
// lost or mixed up a tensor moves the loss by far more than this (the moments are checked bit
// for bit above all).
constexpr double kLossTolerance = 5e-3;

// One tasklet's whole state as a checkpoint holds it.
struct HostCopy {
  std::vector<float> params, m, v;
};

HostCopy state_of(const StageRuntime& runtime) {
  EXPECT_EQ(runtime.chunks().size(), 1u);
  const ChunkModel& chunk = runtime.chunks().front()->model;
  const int64_t n = chunk.layout().total();
  const ConstHostState state = chunk.state_for_reading();
  return {std::vector<float>(state.params, state.params + n),
          std::vector<float>(state.m, state.m + n), std::vector<float>(state.v, state.v + n)};
}

// Bit for bit (memcmp: -0.0 against 0.0 or two NaNs would differ), naming the first tensor and
// element that differs.
void expect_bitwise_equal(const HostCopy& actual, const HostCopy& expected,
                          const ParameterLayout& layout) {
  const auto compare = [&](const std::vector<float>& a, const std::vector<float>& b,
                           const char* what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    if (std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0) return;
    for (const ParameterTensor& t : layout.tensors()) {
      for (int64_t i = t.offset; i < t.offset + t.size; ++i) {
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
          ADD_FAILURE() << what << " of " << t.name << " differ first at element " << i - t.offset
                        << ": " << a[i] << " against " << b[i];
          return;
        }
      }
    }
    ADD_FAILURE() << what << " differ outside every tensor";
  };
  compare(actual.params, expected.params, "the parameters");
  compare(actual.m, expected.m, "the AdamW first moments");
  compare(actual.v, expected.v, "the AdamW second moments");
}

bool all_zero(const std::vector<float>& values) {
  for (float x : values) {
    if (x != 0.0f) return false;
  }
  return true;
}

class CheckpointBackends : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto reason = kernels::cuda::gpu_unavailable_reason()) {
      GTEST_SKIP() << "no GPU: " << *reason;
    }
    dir_ = fs::temp_directory_path() /
           ("tessel-ckpt-backends-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    options_ = testing::tiny_options(placement::ScheduleKind::OneFOneB, 2);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A single-rank runtime on `factory`'s backend, with its own one-rank communicator.
  struct Rank {
    testing::Comms comms;
    std::unique_ptr<StageRuntime> runtime;
  };
  Rank make_rank(const ChunkFactory& factory) const {
    Rank rank;
    rank.comms = testing::connect_ranks({"stage 0 replica 0"});
    rank.runtime = std::make_unique<StageRuntime>(config(), layout_, options_,
                                                  testing::tiny_corpus(), *rank.comms[0],
                                                  /*trace=*/nullptr, factory);
    return rank;
  }

  // `from` trains 2 steps and saves; `to` loads: the same state bit for bit, at the same step
  // and data position; then each trains one more step, with losses within bf16's tolerance.
  void expect_interchangeable(const ChunkFactory& from, Device from_device, const ChunkFactory& to,
                              Device to_device) {
    Rank saver = make_rank(from);
    ASSERT_EQ(saver.runtime->chunks().front()->model.device(), from_device);
    for (int s = 0; s < 2; ++s) saver.runtime->train_step();
    save_checkpoint(dir_.string(), *saver.runtime, *saver.comms[0]);
    ASSERT_EQ(latest_checkpoint(dir_.string()), std::optional<int64_t>(2));
    const HostCopy saved = state_of(*saver.runtime);
    // After two AdamW steps no moment is all zero: a checkpoint that left them out would show.
    ASSERT_FALSE(all_zero(saved.m));
    ASSERT_FALSE(all_zero(saved.v));

    Rank loader = make_rank(to);
    ASSERT_EQ(loader.runtime->chunks().front()->model.device(), to_device);
    // Before loading it holds its own initialisation (moments zero): the load must change that.
    ASSERT_TRUE(all_zero(state_of(*loader.runtime).m));
    load_checkpoint(dir_.string(), 2, *loader.runtime);
    EXPECT_EQ(loader.runtime->steps_done(), 2);
    EXPECT_EQ(loader.runtime->data_position(), saver.runtime->data_position());
    expect_bitwise_equal(state_of(*loader.runtime), saved,
                         loader.runtime->chunks().front()->model.layout());

    // Two more steps each: step 3's loss is the loaded parameters' forward, step 4's follows
    // the update that used the loaded moments.
    for (int64_t step = 3; step <= 4; ++step) {
      const StepReport going_on = saver.runtime->train_step();
      const StepReport loaded = loader.runtime->train_step();
      EXPECT_EQ(going_on.step, step);
      EXPECT_EQ(loaded.step, step);
      EXPECT_NEAR(loaded.loss / going_on.loss, 1.0, kLossTolerance)
          << "step " << step << ": " << to_string(to_device) << " after loading " << loaded.loss
          << ", " << to_string(from_device) << " going on " << going_on.loss;
      std::printf("step %lld loss: %s after loading %.6f, %s going on %.6f\n",
                  static_cast<long long>(step), to_string(to_device).c_str(), loaded.loss,
                  to_string(from_device).c_str(), going_on.loss);
    }
  }

  const PipelineLayout layout_ = PipelineLayout::standard(1, 1, 1, config().layers);
  TrainingOptions options_;
  fs::path dir_;
};

TEST_F(CheckpointBackends, CudaSavesAndTheCpuLoadsTheSameStateBitForBit) {
  expect_interchangeable(cuda_chunk_factory(std::make_shared<CudaDevice>()), Device::kCuda,
                         cpu_chunk_factory(), Device::kCpu);
}

TEST_F(CheckpointBackends, TheCpuSavesAndCudaLoadsTheSameStateBitForBit) {
  expect_interchangeable(cpu_chunk_factory(), Device::kCpu,
                         cuda_chunk_factory(std::make_shared<CudaDevice>()), Device::kCuda);
}

}  // namespace
}  // namespace tessel::stage
