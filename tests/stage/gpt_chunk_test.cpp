// The model chunk: its gradients against central finite differences of its loss, and a model
// cut into two chunks computing exactly what the whole model computes.
#include "noderuntime/stage/gpt_chunk.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "noderuntime/stage/parameter_init.h"

namespace tessel::stage {
namespace {

constexpr int kB = 2;

GptConfig small_config() { return GptConfig{2, 8, 2, 16, 4, 256}; }

struct Batch {
  std::vector<int> inputs, targets;
};

Batch small_batch(const GptConfig& config) {
  Batch b;
  for (int i = 0; i < kB * config.seq_len; ++i) {
    b.inputs.push_back((i * 37 + 11) % config.vocab);
    b.targets.push_back((i * 53 + 5) % config.vocab);
  }
  return b;
}

std::unique_ptr<GptChunk> whole_model(const GptConfig& config) {
  auto chunk = std::make_unique<GptChunk>(config, chunk_spec(config, {config.layers}, 0), kB);
  initialize_parameters(chunk->layout(), 3, chunk->params().data());
  return chunk;
}

// Mean loss of the batch (forward only: the head's backward writes gradients, so they are
// zeroed again by the caller when it matters).
double mean_loss(GptChunk& chunk, const Batch& batch) {
  ChunkActivations act = chunk.new_activations();
  const int n = kB * chunk.config().seq_len;
  return chunk.forward(act, batch.inputs.data(), batch.targets.data(), 1.0f / n) / n;
}

TEST(GptChunk, GradientsMatchFiniteDifferences) {
  const GptConfig config = small_config();
  const std::unique_ptr<GptChunk> whole_chunk = whole_model(config);
  GptChunk& chunk = *whole_chunk;
  const Batch batch = small_batch(config);
  ChunkActivations act = chunk.new_activations();
  const int n = kB * config.seq_len;
  chunk.forward(act, batch.inputs.data(), batch.targets.data(), 1.0f / n);
  std::vector<int> finished;
  chunk.backward(act, batch.inputs.data(), [&](int block) { finished.push_back(block); });
  EXPECT_EQ(finished, (std::vector<int>{1, 0}));  // blocks in reverse
  const std::vector<float> grads = chunk.grads();

  // Central differences at h and h/2 combined (Richardson) cancel the h^2 error term, which
  // at h = 1e-2 is already visible on the residual stream's biases; the tolerance covers
  // float rounding of the loss (~5e-7) divided by the step.
  constexpr float kStep = 1e-2f;
  int checked = 0;
  double worst = 0;
  for (const ParameterTensor& t : chunk.layout().tensors()) {
    // A few elements of every tensor; for wte the rows of tokens that occur.
    for (int64_t k = 0; k < 3; ++k) {
      const int64_t i = t.name == "wte.weight" ? int64_t{batch.inputs[k]} * config.channels + k
                                               : (k * 7919) % t.size;
      float& p = chunk.params()[t.offset + i];
      const float saved = p;
      auto central = [&](float h) {
        p = saved + h;
        const double up = mean_loss(chunk, batch);
        p = saved - h;
        const double down = mean_loss(chunk, batch);
        p = saved;
        return (up - down) / (double(saved + h) - double(saved - h));
      };
      const double numeric = (4 * central(kStep / 2) - central(kStep)) / 3;
      const double analytic = grads[t.offset + i];
      EXPECT_NEAR(analytic, numeric, 2e-4 + 1e-2 * std::abs(numeric)) << t.name << "[" << i << "]";
      worst = std::max(worst, std::abs(analytic - numeric) / (2e-4 + 1e-2 * std::abs(numeric)));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * static_cast<int>(chunk.layout().tensors().size()));
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

TEST(GptChunk, TwoChunksComputeWhatTheWholeModelComputes) {
  const GptConfig config = small_config();
  const Batch batch = small_batch(config);
  const int n = kB * config.seq_len;
  const std::unique_ptr<GptChunk> whole_chunk = whole_model(config);
  GptChunk& whole = *whole_chunk;
  ChunkActivations act = whole.new_activations();
  const double loss = whole.forward(act, batch.inputs.data(), batch.targets.data(), 1.0f / n);
  whole.backward(act, batch.inputs.data(), {});

  const std::vector<int> split = {1, 1};
  GptChunk first(config, chunk_spec(config, split, 0), kB);
  GptChunk last(config, chunk_spec(config, split, 1), kB);
  initialize_parameters(first.layout(), 3, first.params().data());
  initialize_parameters(last.layout(), 3, last.params().data());
  ChunkActivations a = first.new_activations(), b = last.new_activations();
  first.forward(a, batch.inputs.data(), nullptr, 0);
  std::copy(first.output(a), first.output(a) + first.activation_floats(), b.input.begin());
  const double split_loss = last.forward(b, nullptr, batch.targets.data(), 1.0f / n);
  last.backward(b, nullptr, {});
  a.grad = b.grad;
  first.backward(a, batch.inputs.data(), {});

  EXPECT_EQ(split_loss, loss);
  for (const GptChunk* part : {&first, &last}) {
    for (const ParameterTensor& t : part->layout().tensors()) {
      if (t.name == "wte.weight" || t.name == "lm_head.weight") continue;
      const int64_t w = whole.layout().offset(t.name);
      const std::vector<float> expected(whole.grads().begin() + w,
                                        whole.grads().begin() + w + t.size);
      const std::vector<float> got(part->grads().begin() + t.offset,
                                   part->grads().begin() + t.offset + t.size);
      EXPECT_EQ(got, expected) << t.name;
    }
  }
  // The tied table: the whole model's gradient is the sum of the two copies' gradients.
  const int64_t size = int64_t{config.vocab} * config.channels;
  const float* wte = whole.grads().data() + whole.layout().offset("wte.weight");
  const float* embedding = first.grads().data() + first.layout().offset("wte.weight");
  const float* head = last.grads().data() + last.layout().offset("lm_head.weight");
  for (int64_t i = 0; i < size; ++i) {
    ASSERT_NEAR(embedding[i] + head[i], wte[i], 1e-6 + 1e-5 * std::abs(wte[i])) << i;
  }
}

// A bf16 job's stages exchange bf16: the first chunk's output leaves rounded to bf16 (half the
// bytes), the second computes from it widened, and the input gradient goes back rounded too.
TEST(GptChunk, Bf16ExchangeRoundsWhatLeavesAndWidensWhatArrives) {
  GptConfig config = small_config();
  config.precision = placement::Precision::BF16;
  const Batch batch = small_batch(config);
  const int n = kB * config.seq_len;
  const std::vector<int> split = {1, 1};
  GptChunk first(config, chunk_spec(config, split, 0), kB);
  GptChunk last(config, chunk_spec(config, split, 1), kB);
  initialize_parameters(first.layout(), 3, first.params().data());
  initialize_parameters(last.layout(), 3, last.params().data());
  ASSERT_EQ(first.wire_dtype(), transport::DType::kBF16);
  ChunkActivations a = first.new_activations(), b = last.new_activations();
  first.forward(a, batch.inputs.data(), nullptr, 0);
  const std::span<const std::byte> sent = first.send_payload(a, false);
  ASSERT_EQ(sent.size(), size_t(first.activation_floats()) * 2);
  const auto* bits = reinterpret_cast<const uint16_t*>(sent.data());
  for (int64_t i = 0; i < first.activation_floats(); ++i) {
    const float x = first.output(a)[i];
    uint32_t word = uint32_t{bits[i]} << 16;
    float rounded;
    std::memcpy(&rounded, &word, sizeof rounded);
    ASSERT_LE(std::abs(rounded - x), std::abs(x) * (1.0f / 256)) << i;  // bf16: 8 bits
  }
  const std::span<std::byte> received = last.receive_buffer(b, false);
  ASSERT_EQ(received.size(), sent.size());
  std::copy(sent.begin(), sent.end(), received.begin());
  last.forward(b, nullptr, batch.targets.data(), 1.0f / n);
  for (int64_t i = 0; i < first.activation_floats(); ++i) {
    uint32_t word = uint32_t{bits[i]} << 16;
    float widened;
    std::memcpy(&widened, &word, sizeof widened);
    ASSERT_EQ(b.input[i], widened) << i;  // the second chunk computed from exactly what came
  }
  last.backward(b, nullptr, {});
  const std::span<const std::byte> grad = last.send_payload(b, true);
  const std::span<std::byte> grad_in = first.receive_buffer(a, true);
  ASSERT_EQ(grad.size(), grad_in.size());
  std::copy(grad.begin(), grad.end(), grad_in.begin());
  first.backward(a, batch.inputs.data(), {});
  double norm = 0;
  for (float g : first.grads()) norm += double(g) * g;
  EXPECT_GT(norm, 0.0);  // the gradient came through
}

TEST(GptChunk, RejectsBadShapes) {
  const GptConfig config = small_config();
  EXPECT_THROW(GptChunk(config, chunk_spec(config, {2}, 0), 0), ConfigError);
  ChunkSpec empty = chunk_spec(config, {2}, 0);
  empty.num_layers = 0;
  EXPECT_THROW(GptChunk(config, empty, 1), ConfigError);
}

}  // namespace
}  // namespace tessel::stage
