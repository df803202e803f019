#include "noderuntime/stage/gpt_config.h"

#include "placement/limits.h"

namespace tessel::stage {

void GptConfig::validate() const {
  auto need = [](bool ok, const char* field, int value, const std::string& rule) {
    if (!ok) {
      throw ConfigError(std::string("model.") + field + ": " + rule + ", got " +
                        std::to_string(value));
    }
  };
  need(layers >= 1, "layers", layers, "must be >= 1");
  need(channels >= 1, "hidden", channels, "must be >= 1");
  need(heads >= 1, "heads", heads, "must be >= 1");
  need(channels % heads == 0, "heads", heads, "must divide hidden");
  need(ffn >= 1, "ffn_hidden", ffn, "must be >= 1");
  need(seq_len >= 1, "seq_len", seq_len, "must be >= 1");
  need(vocab >= 1, "vocab", vocab, "must be >= 1");
  // Upper bounds (placement/limits.h): every parameter and activation count below stays far
  // inside int64, and a model this size is refused before anything is allocated for it.
  namespace p = placement;
  need(layers <= p::kMaxLayers, "layers", layers,
       "must be at most " + std::to_string(p::kMaxLayers));
  need(channels <= p::kMaxHidden, "hidden", channels,
       "must be at most " + std::to_string(p::kMaxHidden));
  need(ffn <= p::kMaxFfnHidden, "ffn_hidden", ffn,
       "must be at most " + std::to_string(p::kMaxFfnHidden));
  need(seq_len <= p::kMaxSeqLen, "seq_len", seq_len,
       "must be at most " + std::to_string(p::kMaxSeqLen));
  need(vocab <= p::kMaxVocab, "vocab", vocab, "must be at most " + std::to_string(p::kMaxVocab));
}

// ln_1, ln_2: 2C each; qkv: 3C x C + 3C; proj: C x C + C; fc: F x C + F; mlp proj: C x F + C.
int64_t GptConfig::parameters_per_layer() const {
  const int64_t c = channels, f = ffn;
  return 4 * c + (3 * c * c + 3 * c) + (c * c + c) + (f * c + f) + (c * f + c);
}

int64_t GptConfig::embedding_parameters() const {
  return int64_t{vocab} * channels + int64_t{seq_len} * channels;
}

GptConfig gpt_config_from_workload(const placement::Workload& workload) {
  GptConfig config{workload.layers,  workload.hidden, workload.heads,    workload.ffn(),
                   workload.seq_len, workload.vocab,  workload.precision};
  config.validate();
  return config;
}

}  // namespace tessel::stage
