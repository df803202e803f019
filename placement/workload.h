// The workload: a GPT model shape and how it is trained, and what follows from it (bytes
// sent between stages, gradient bytes, FLOPs, memory). One type, one YAML form, one parser.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "placement/data_parallel_mode.h"

namespace tessel::placement {

class WorkloadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// fp32: everything in fp32. fp16/bf16: mixed precision as GPT training does it: 16-bit
// weights and activations, fp32 master weights, gradients and optimizer state.
enum class Precision { FP32, FP16, BF16 };
const char* to_string(Precision p);
Precision parse_precision(const std::string& s);  // throws WorkloadError naming the value

struct Workload {
  std::string name = "custom";
  int layers = 0;
  int hidden = 0;
  int ffn_hidden = 0;  // 0 means 4 x hidden
  int heads = 0;
  int seq_len = 0;
  int vocab = 50257;
  int micro_batch = 1;   // sequences per micro-batch
  int global_batch = 0;  // sequences per iteration, all replicas together
  Precision precision = Precision::FP16;
  bool recompute_activations = true;  // full activation recomputation per layer
  DataParallelMode data_parallel;     // YAML: data_parallel (synchronous unless given)

  int ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int activation_bytes_per_element() const { return precision == Precision::FP32 ? 4 : 2; }

  // Throws WorkloadError naming the field when a value is out of range or inconsistent.
  void validate(const std::string& source = "workload") const;

  // --- derived quantities (formulas documented where computed, workload.cpp) ---
  int64_t parameters_per_layer() const;
  int64_t embedding_parameters() const;  // token + position tables (token table tied to the head)
  int64_t total_parameters() const;
  // Sequences each replica processes per iteration, and micro-batches per replica.
  double sequences_per_replica(int replicas) const;
  int micro_batches_per_replica(int replicas) const;
  // Bytes of one message across a stage boundary (activations forward or their gradient
  // backward) for one micro-batch.
  double activation_message_bytes() const;
  // Parameters held by a stage: its layers, plus the token and position tables on the first
  // stage, plus the final layernorm and a copy of the (tied) token table on the last.
  int64_t stage_parameters(int layers_in_stage, bool first, bool last) const;
  // Bytes of gradients a stage all-reduces over its data-parallel group per iteration (fp32
  // gradients). With more than one stage (first != last) the tied token table's copies are
  // left out: they are summed over the first and last stages together (table_gradient_bytes).
  double gradient_bytes(int layers_in_stage, bool first, bool last) const;
  // Bytes of the tied token table's gradient (V x h, fp32).
  double table_gradient_bytes() const;
  // Forward FLOPs for one micro-batch: one transformer layer, and the head (last stage).
  double forward_flops_per_layer() const;
  double forward_flops_head() const;
  // Backward FLOPs are 2x forward; recomputation adds one more forward.
  double backward_flops_factor() const { return recompute_activations ? 3.0 : 2.0; }
  // Bytes of weights, gradients and optimizer state for a stage (persistent memory).
  double state_bytes(int layers_in_stage, bool first, bool last) const;
  // Bytes of activations kept per micro-batch in flight for a stage of that many layers.
  double activation_bytes_in_flight(int layers_in_stage) const;
  // Bytes needed at most while one micro-batch's layer runs (working set, one layer).
  double working_bytes() const;

  // The paper's cost-model inputs derived from this workload (see docs/placement.md):
  // c_dp = gradient GB of one (average) stage; c_pp = activation GB of one replica's
  // whole batch. Both in units of 1e9 bytes.
  double paper_c_dp_gb(int stages) const;
  double paper_c_pp_gb(int replicas) const;
};

// Named presets: gpt3-1.3b (the paper's GPT3-XL), gpt2-124m, gpt2-350m, gpt2-1.5b, gpt3-6.7b.
Workload workload_preset(const std::string& name);  // throws WorkloadError listing the names
std::vector<std::string> workload_preset_names();

Workload parse_workload_yaml(const std::string& text, const std::string& source);
Workload load_workload_file(const std::string& path);
std::string workload_to_yaml(const Workload& w);

}  // namespace tessel::placement
