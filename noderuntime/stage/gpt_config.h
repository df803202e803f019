// The GPT-2 shape the stage runtime trains, in llm.c's letters, taken from the project's one
// model type (placement::Workload) so the planner and the runtime can never disagree on it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "placement/workload.h"

namespace tessel::stage {

// A bad value anywhere in the stage runtime's configuration; the message names the field.
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct GptConfig {
  int layers = 0;    // L
  int channels = 0;  // C
  int heads = 0;     // NH; C must be a multiple
  int ffn = 0;       // F, the MLP width (4C in GPT-2)
  int seq_len = 0;   // T, also the rows of the position table
  int vocab = 0;     // V
  // What crosses between stages (and, on the CUDA backend, what the matmuls and activations are
  // computed in): fp32, or bf16 (half the bytes on the links). The CPU backend computes in fp32
  // either way.
  placement::Precision precision = placement::Precision::FP32;

  // Throws ConfigError naming the field ("model.heads: ...") when a value is out of range.
  void validate() const;

  // Parameters of one transformer block; of the token and position tables.
  int64_t parameters_per_layer() const;
  int64_t embedding_parameters() const;

  bool operator==(const GptConfig&) const = default;
};

// The model fields of a workload (layers, hidden, heads, ffn, seq_len, vocab), validated.
GptConfig gpt_config_from_workload(const placement::Workload& workload);

}  // namespace tessel::stage
