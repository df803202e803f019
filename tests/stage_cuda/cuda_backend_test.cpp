// The stage runtime's CUDA backend (noderuntime/stage/cuda) against its CPU backend: one chunk's
// forward and backward (loss, output, input gradient and every parameter gradient), its
// optimizer step, its state and gradient buckets through host memory, and a two-stage,
// two-replica job of tessel-stage processes. Built twice, like tests/cuda: on the SIMT emulator
// (stage_cuda_simt_tests, on every machine) and against the CUDA runtime (stage_cuda_tests,
// which skips without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cuda/device.h"
#include "noderuntime/stage/cuda/gpt_chunk_cuda.h"
#include "noderuntime/stage/gpt_chunk.h"
#include "tests/stage/stage_process_support.h"

#ifndef TESSEL_STAGE_CUDA_BINARY
#error "define TESSEL_STAGE_CUDA_BINARY as a tessel-stage built with the CUDA backend"
#endif

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;

// Head size 64, as the CUDA attention needs; small enough for the emulator.
GptConfig config() {
  return GptConfig{/*layers=*/2, /*channels=*/128, /*heads=*/2,
                   /*ffn=*/512,  /*seq_len=*/16,
                   /*vocab=*/256};
}
constexpr int kBatch = 2;

// Every activation is rounded to bf16 (relative 2^-9) at each of about twenty ops between the
// loss and the first layer; the errors add up along the way (tests/cuda/gpt_step_test.cpp
// measured 0.7% at worst for one layer). A wrong layout, a missed += or a missed zeroing gives
// errors of 0.4 and more.
constexpr double kLossTolerance = 1e-2;
constexpr double kTensorTolerance = 5e-2;

double relative_l2(const float* actual, const float* expected, int64_t n) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff += (double(actual[i]) - expected[i]) * (double(actual[i]) - expected[i]);
    norm += double(expected[i]) * expected[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits += 0x7FFF + ((bits >> 16) & 1);  // round to nearest even
  bits &= 0xFFFF0000u;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(static_cast<size_t>(n));
  for (float& x : out) x = normal(rng);
  return out;
}

std::vector<int> random_tokens(std::mt19937& rng, int64_t n, int vocab) {
  std::uniform_int_distribution<int> pick(0, vocab - 1);
  std::vector<int> out(static_cast<size_t>(n));
  for (int& t : out) t = pick(rng);
  return out;
}

// The CPU chunk and the CUDA chunk of one virtual stage, on the same bf16-representable weights
// (what both compute with), so the comparison sees the activations' rounding only.
struct ChunkPair {
  ChunkPair(const ChunkSpec& spec, uint64_t seed)
      : cpu(config(), spec, kBatch),
        cuda(cuda_chunk_factory(std::make_shared<CudaDevice>())(config(), spec, kBatch)) {
    cpu.initialize(seed);
    for (float& p : cpu.params()) p = round_to_bf16(p);
    const HostState state = cuda->state_for_writing();
    const int64_t n = cpu.layout().total();
    std::copy(cpu.params().begin(), cpu.params().end(), state.params);
    std::fill(state.m, state.m + n, 0.0f);
    std::fill(state.v, state.v + n, 0.0f);
    cuda->state_written();
    cuda->zero_gradients();
    cpu.zero_gradients();
  }
  GptChunk cpu;
  std::unique_ptr<ChunkModel> cuda;
};

// Every gradient of the chunk in host memory, through its buckets.
std::vector<float> host_gradients(ChunkModel& chunk) {
  std::vector<float> out(static_cast<size_t>(chunk.layout().total()));
  const int buckets = static_cast<int>(chunk.layout().buckets().size());
  for (int b = 0; b < buckets; ++b) {
    const std::span<float> g = chunk.gradients_for_reduce(b);
    std::copy(g.begin(), g.end(), out.begin() + chunk.layout().buckets()[b].offset);
  }
  return out;
}

class CudaBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto reason = kernels::cuda::gpu_unavailable_reason()) {
      GTEST_SKIP() << "no GPU: " << *reason;
    }
  }
};

// Forward and backward of one micro-batch on both backends of chunk `spec`; compares what each
// part of the model produces.
void expect_step_matches(const ChunkSpec& spec) {
  SCOPED_TRACE("virtual stage " + std::to_string(spec.virtual_stage));
  ChunkPair pair(spec, 11);
  const GptConfig c = config();
  const int64_t BT = int64_t{kBatch} * c.seq_len, BTC = BT * c.channels;
  std::mt19937 rng(20261126 + spec.virtual_stage);
  const std::vector<int> tokens = random_tokens(rng, BT, c.vocab);
  const std::vector<int> targets = random_tokens(rng, BT, c.vocab);
  const std::vector<float> input = random_floats(rng, BTC, 1.0f);
  const std::vector<float> output_grad = random_floats(rng, BTC, 1e-3f);

  ChunkActivations cpu_act = pair.cpu.new_activations();
  ChunkActivations cuda_act = pair.cuda->new_activations();
  if (!spec.embedding) {
    std::vector<float> rounded = input;
    for (float& x : rounded) x = round_to_bf16(x);
    cpu_act.input = rounded;
    cuda_act.input = rounded;
  }
  const float dloss = 1.0f / float(BT);
  const double cpu_loss = pair.cpu.forward(cpu_act, tokens.data(), targets.data(), dloss);
  const double cuda_loss = pair.cuda->forward(cuda_act, tokens.data(), targets.data(), dloss);
  if (spec.head) {
    EXPECT_NEAR(cuda_loss / cpu_loss, 1.0, kLossTolerance) << cuda_loss << " vs " << cpu_loss;
  } else {
    EXPECT_EQ(cuda_loss, 0.0);
    pair.cuda->wait_host(cuda_act);  // the output on its way to the host
    EXPECT_LE(relative_l2(pair.cuda->output(cuda_act), pair.cpu.output(cpu_act), BTC),
              kTensorTolerance);
    cpu_act.grad = output_grad;
    cuda_act.grad = output_grad;
  }
  std::vector<int> cpu_done, cuda_done;
  pair.cpu.backward(cpu_act, tokens.data(), [&](int i) { cpu_done.push_back(i); });
  pair.cuda->backward(cuda_act, tokens.data(), [&](int i) { cuda_done.push_back(i); });
  EXPECT_EQ(cuda_done, cpu_done);
  if (!spec.embedding) {
    pair.cuda->wait_host(cuda_act);  // the input gradient on its way to the host
    EXPECT_LE(relative_l2(cuda_act.grad.data(), cpu_act.grad.data(), BTC), kTensorTolerance)
        << "the input gradient";
  }
  const std::vector<float> cuda_grads = host_gradients(*pair.cuda);
  for (const ParameterTensor& t : pair.cpu.layout().tensors()) {
    EXPECT_LE(relative_l2(cuda_grads.data() + t.offset, pair.cpu.grads().data() + t.offset, t.size),
              kTensorTolerance)
        << "gradient of " << t.name;
  }
}

TEST_F(CudaBackend, OneMicroBatchMatchesTheCpuBackendOnEveryPartOfTheModel) {
  const GptConfig c = config();
  expect_step_matches(chunk_spec(c, {2}, 0));     // the whole model: embedding and head
  expect_step_matches(chunk_spec(c, {1, 1}, 0));  // the first of two stages
  expect_step_matches(chunk_spec(c, {1, 1}, 1));  // the last of two (lm_head copy)
}

TEST_F(CudaBackend, StateAndGradientBucketsTravelThroughHostMemoryUnchanged) {
  const GptConfig c = config();
  ChunkPair pair(chunk_spec(c, {2}, 0), 3);
  ChunkModel& chunk = *pair.cuda;
  const int64_t n = chunk.layout().total();
  std::mt19937 rng(5);
  const std::vector<float> params = random_floats(rng, n, 0.1f), m = random_floats(rng, n, 0.01f),
                           v = random_floats(rng, n, 0.01f);
  const HostState write = chunk.state_for_writing();
  std::copy(params.begin(), params.end(), write.params);
  std::copy(m.begin(), m.end(), write.m);
  std::copy(v.begin(), v.end(), write.v);
  chunk.state_written();
  const ConstHostState read = chunk.state_for_reading();
  EXPECT_EQ(std::memcmp(read.params, params.data(), sizeof(float) * n), 0);
  EXPECT_EQ(std::memcmp(read.m, m.data(), sizeof(float) * n), 0);
  EXPECT_EQ(std::memcmp(read.v, v.data(), sizeof(float) * n), 0);

  // A bucket summed on the host (here: doubled) comes back into the chunk's gradients.
  ChunkActivations act = chunk.new_activations();
  const int64_t BT = int64_t{kBatch} * c.seq_len;
  const std::vector<int> tokens = random_tokens(rng, BT, c.vocab);
  chunk.forward(act, tokens.data(), tokens.data(), 1.0f / float(BT));
  chunk.backward(act, tokens.data(), {});
  const std::vector<float> before = host_gradients(chunk);
  const int bucket = chunk.layout().layer_bucket(1);
  for (float& g : chunk.gradients_for_reduce(bucket)) g *= 2;
  chunk.gradients_reduced(bucket);
  const std::vector<float> after = host_gradients(chunk);
  const GradientBucket& b = chunk.layout().buckets()[bucket];
  double sum_of_squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool in_bucket = i >= b.offset && i < b.offset + b.size;
    ASSERT_EQ(after[i], in_bucket ? 2 * before[i] : before[i]) << "gradient element " << i;
  }
  for (const ParameterTensor& t : chunk.layout().tensors()) {
    if (!t.in_norm) continue;
    for (int64_t i = t.offset; i < t.offset + t.size; ++i)
      sum_of_squares += double(after[i]) * after[i];
  }
  EXPECT_NEAR(chunk.gradient_sum_of_squares() / sum_of_squares, 1.0, 1e-9);
}

TEST_F(CudaBackend, AdamWStepIsTheCpuUpdateOfItsOwnGradients) {
  const GptConfig c = config();
  ChunkPair pair(chunk_spec(c, {1, 1}, 1), 9);
  ChunkModel& chunk = *pair.cuda;
  const int64_t BT = int64_t{kBatch} * c.seq_len, n = chunk.layout().total();
  std::mt19937 rng(8);
  ChunkActivations act = chunk.new_activations();
  act.input = random_floats(rng, BT * c.channels, 1.0f);
  const std::vector<int> targets = random_tokens(rng, BT, c.vocab);
  chunk.forward(act, nullptr, targets.data(), 1.0f / float(BT));
  chunk.backward(act, nullptr, {});
  const std::vector<float> grads = host_gradients(chunk);
  const ConstHostState old_state = chunk.state_for_reading();
  std::vector<float> params(old_state.params, old_state.params + n), m(n, 0.0f), v(n, 0.0f);
  kernels::cpu::AdamWHyperparameters hp;
  hp.learning_rate = 1e-2f;
  hp.weight_decay = 0.1f;
  const float scale = 0.5f;
  chunk.adamw_step(hp, 1, scale);
  AdamWState expected{m, v};
  adamw_step(chunk.layout(), params.data(), expected, grads.data(), hp, 1, scale);
  const ConstHostState updated = chunk.state_for_reading();
  for (const ParameterTensor& t : chunk.layout().tensors()) {
    EXPECT_LE(relative_l2(updated.params + t.offset, params.data() + t.offset, t.size), 1e-6)
        << t.name << (t.decay ? " (decayed)" : "");
    EXPECT_LE(relative_l2(updated.m + t.offset, expected.m.data() + t.offset, t.size), 1e-6)
        << t.name;
  }
}

TEST(CudaBackendDevice, WrongHeadSizeIsRefusedWithTheReason) {
  if (const auto reason = kernels::cuda::gpu_unavailable_reason()) {
    GTEST_SKIP() << "no GPU: " << *reason;
  }
  GptConfig c = config();
  c.heads = 4;  // head size 32
  try {
    cuda_chunk_factory(std::make_shared<CudaDevice>())(c, chunk_spec(c, {2}, 0), kBatch);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("heads of 64 or 128 channels"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("is 32"), std::string::npos) << e.what();
  }
}

// The executable a build made, or the one an environment variable names (a copy of the build on
// another machine, e.g. a GPU machine that runs executables built here).
std::string executable(const char* variable, const char* built) {
  const char* path = std::getenv(variable);
  return path != nullptr && *path != '\0' ? path : built;
}

// A job's losses per step (the same on every rank: the loss is all-reduced), run with `binary`
// and `device`; fails the test when a rank fails.
std::vector<double> job_losses(const nlohmann::json& job, const std::string& binary,
                               const std::string& device) {
  const fs::path dir = fs::temp_directory_path() /
                       ("tessel-cuda-backend-" + device + "-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string job_path = (dir / "job.json").string();
  std::ofstream(job_path) << job.dump();
  const int ranks = job["ranks"].size();
  std::vector<std::unique_ptr<testing::StageProcess>> processes;
  for (int r = 0; r < ranks; ++r) {
    processes.push_back(std::make_unique<testing::StageProcess>(
        job_path, r, binary, std::vector<std::string>{"--device", device}));
  }
  std::vector<double> losses;
  for (int r = 0; r < ranks; ++r) {
    const int status = processes[r]->finish(std::chrono::seconds(600));
    EXPECT_EQ(status, 0) << "rank " << r << ": " << processes[r]->stderr_text();
    EXPECT_NE(processes[r]->stderr_text().find("device " + device), std::string::npos)
        << processes[r]->stderr_text();
    if (r == 0) {
      losses = processes[r]->losses();
    } else {
      EXPECT_EQ(processes[r]->losses(), losses) << "rank " << r << " saw other losses";
    }
  }
  fs::remove_all(dir);
  return losses;
}

TEST_F(CudaBackend, TwoStagesTwoReplicasTrainAsTheCpuBackendDoes) {
  nlohmann::json job = testing::tiny_job(2, 2, 2, 2, "1f1b", 3);
  auto& model = job["workload"]["model"];
  model["hidden"] = 128;
  model["heads"] = 2;
  model["ffn_hidden"] = 512;
  model["precision"] = "bf16";
  const std::vector<double> cuda =
      job_losses(job, executable("TESSEL_STAGE_CUDA_BINARY", TESSEL_STAGE_CUDA_BINARY), "cuda");
  const std::vector<double> cpu =
      job_losses(job, executable("TESSEL_STAGE_BINARY", TESSEL_STAGE_BINARY), "cpu");
  ASSERT_EQ(cuda.size(), 3u);
  ASSERT_EQ(cpu.size(), 3u);
  std::printf("step | loss, cuda | loss, cpu | ratio\n");
  for (size_t s = 0; s < cpu.size(); ++s) {
    std::printf("%4zu | %10.6f | %9.6f | %.5f\n", s + 1, cuda[s], cpu[s], cuda[s] / cpu[s]);
    // bf16 weights and activations against fp32: 1e-4 apart on the emulator over these three
    // steps; a missing gradient or update moves step 2's loss by far more than this.
    EXPECT_NEAR(cuda[s] / cpu[s], 1.0, kLossTolerance / 2) << "step " << s + 1;
  }
}

}  // namespace
}  // namespace tessel::stage
