// gpt-reference-dump <out.safetensors>: one forward and backward of the CPU stage runtime's GPT
// (GptChunk, the model `tessel local` and the stage pods train) on a tiny GPT-2, written for
// torch_gpt2_reference.py to recompute in PyTorch. The file holds, each as its own tensor:
//   param/<name>, grad/<name>  every parameter (ParameterLayout's names) and its gradient, F32
//   tokens, targets            the micro-batch, I32 (B, T)
//   loss                       the mean loss, F64 (1)
// and the model's shape in its metadata (layers, channels, heads, ffn, seq_len, vocab, batch).
//
// The whole model is one chunk (embedding, every block, head: a single stage), so the tied
// token table wte is both the embedding and the LM head and its gradient is the sum of both uses.
// The matrices are the runtime's own initialisation (initialize(seed)); the biases and
// layernorm parameters, which it starts at exactly 0 and 1, are then moved off those values
// (see spread_constant_tensors), or a wrong bias or gain in the forward could not show.
#include <cstdint>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "noderuntime/stage/gpt_chunk.h"
#include "noderuntime/stage/parameter_init.h"
#include "noderuntime/stage/safetensors.h"

namespace tessel::stage {
namespace {

// A tiny GPT-2 on bytes: 3 blocks, hidden 64 in 4 heads of 16, MLP 4x, 32 positions.
constexpr int kBatch = 2;
constexpr int kSeqLen = 32;
const GptConfig kConfig{/*layers=*/3,        /*channels=*/64, /*heads=*/4, /*ffn=*/256,
                        /*seq_len=*/kSeqLen, /*vocab=*/256};
constexpr uint64_t kSeed = 1234;

// Spread of the biases (around 0) and layernorm gains (around 1). A bias of this size pushes the
// MLP's pre-activations out of GELU's near-linear middle and makes the attention scores uneven,
// so the reference sees every op's non-linear part, not only its slope at the runtime's start.
// Measured: a reference with GELU by erf instead of tanh misses tessel's gradients by 3.2e-4
// with these spreads, by 4.1e-5 without (against a tolerance of 1e-5).
constexpr float kBiasSpread = 0.5f;
constexpr float kGainSpread = 0.2f;

// The micro-batch: row b reads bytes [b T, b T + T) of the text and predicts the byte after
// each. Repeated bytes make wte's gradient add several positions into one row.
constexpr std::string_view kText =
    "the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs";
static_assert(kText.size() >= size_t{kBatch} * kSeqLen + 1, "the text must cover B*T+1 bytes");

void spread_constant_tensors(GptChunk& chunk) {
  for (const ParameterTensor& t : chunk.layout().tensors()) {
    if (t.init == ParameterInit::kNormal) continue;
    const float spread = t.init == ParameterInit::kOnes ? kGainSpread : kBiasSpread;
    // A stream of its own ("reference/<name>"), so no value repeats one of the runtime's.
    const uint64_t stream = parameter_stream(kSeed, "reference/" + t.name);
    float* values = chunk.params().data() + t.offset;
    for (int64_t i = 0; i < t.size; ++i) values[i] += spread * standard_normal_at(stream, i);
  }
}

template <class T>
StoredTensor stored(const std::string& dtype, std::vector<int64_t> shape,
                    const std::vector<T>& values) {
  StoredTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.resize(values.size() * sizeof(T));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

void run(const std::string& path) {
  const ChunkSpec whole = chunk_spec(kConfig, {kConfig.layers}, 0);
  GptChunk chunk(kConfig, whole, kBatch);
  chunk.initialize(kSeed);
  spread_constant_tensors(chunk);

  const int T = kConfig.seq_len, n = kBatch * T;
  std::vector<int> tokens(n), targets(n);
  for (int b = 0; b < kBatch; ++b) {
    for (int t = 0; t < T; ++t) {
      tokens[b * T + t] = static_cast<unsigned char>(kText[b * T + t]);
      targets[b * T + t] = static_cast<unsigned char>(kText[b * T + t + 1]);
    }
  }
  chunk.zero_gradients();
  ChunkActivations act = chunk.new_activations();
  const double loss_sum = chunk.forward(act, tokens.data(), targets.data(), 1.0f / float(n));
  chunk.backward(act, tokens.data(), nullptr);

  SafetensorsFile file;
  for (const ParameterTensor& t : chunk.layout().tensors()) {
    file.add_f32("param/" + t.name, t.shape, chunk.params().data() + t.offset);
    file.add_f32("grad/" + t.name, t.shape, chunk.grads().data() + t.offset);
  }
  file.tensors["tokens"] = stored("I32", {kBatch, T}, tokens);
  file.tensors["targets"] = stored("I32", {kBatch, T}, targets);
  file.tensors["loss"] = stored("F64", {1}, std::vector<double>{loss_sum / n});
  file.metadata = {{"layers", std::to_string(kConfig.layers)},
                   {"channels", std::to_string(kConfig.channels)},
                   {"heads", std::to_string(kConfig.heads)},
                   {"ffn", std::to_string(kConfig.ffn)},
                   {"seq_len", std::to_string(kConfig.seq_len)},
                   {"vocab", std::to_string(kConfig.vocab)},
                   {"batch", std::to_string(kBatch)}};
  write_safetensors(path, file);
}

}  // namespace
}  // namespace tessel::stage

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: gpt-reference-dump <out.safetensors>\n";
    return 2;
  }
  try {
    tessel::stage::run(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "gpt-reference-dump: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
