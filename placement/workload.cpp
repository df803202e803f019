#include "placement/workload.h"

#include <cmath>

#include "placement/limits.h"

namespace tessel::placement {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::FP32:
      return "fp32";
    case Precision::FP16:
      return "fp16";
    case Precision::BF16:
      return "bf16";
  }
  return "?";
}

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::FP32;
  if (s == "fp16") return Precision::FP16;
  if (s == "bf16") return Precision::BF16;
  throw WorkloadError("unknown precision '" + s + "' (expected fp32, fp16 or bf16)");
}

void Workload::validate(const std::string& source) const {
  auto need = [&](bool ok, const char* field, const std::string& why) {
    if (!ok) throw WorkloadError(source + ": " + field + ": " + why);
  };
  // Each field in [min, max]; the upper bounds (placement/limits.h) keep every product of them
  // that the cost models and the runtime form inside int64.
  auto in_range = [&](int value, const char* field, int min, int max) {
    if (value < min) {
      need(false, field, "must be >= " + std::to_string(min) + ", got " + std::to_string(value));
    }
    need(value <= max, field,
         "must be at most " + std::to_string(max) + ", got " + std::to_string(value));
  };
  in_range(layers, "layers", 1, kMaxLayers);
  in_range(hidden, "hidden", 1, kMaxHidden);
  in_range(heads, "heads", 1, kMaxHidden);
  need(hidden % heads == 0, "heads",
       "hidden (" + std::to_string(hidden) + ") must be a multiple of heads (" +
           std::to_string(heads) + ")");
  need(ffn_hidden >= 0, "ffn_hidden", "must be >= 0 (0 means 4 x hidden)");
  in_range(ffn_hidden, "ffn_hidden", 0, kMaxFfnHidden);
  in_range(seq_len, "seq_len", 1, kMaxSeqLen);
  in_range(vocab, "vocab", 1, kMaxVocab);
  in_range(micro_batch, "micro_batch", 1, kMaxMicroBatch);
  need(global_batch >= micro_batch, "global_batch",
       "must be >= micro_batch (" + std::to_string(micro_batch) + "), got " +
           std::to_string(global_batch));
  in_range(global_batch, "global_batch", 1, kMaxGlobalBatch);
  data_parallel.validate(source);
}

// Per layer of a GPT-2/3 block with biases, h = hidden, f = ffn:
//   attention: QKV h x 3h + 3h, output projection h x h + h   -> 4h^2 + 4h
//   MLP:       h x f + f, f x h + h                            -> 2hf + f + h
//   two layernorms (gain + bias)                               -> 4h
int64_t Workload::parameters_per_layer() const {
  const int64_t h = hidden, f = ffn();
  return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
}

// Token table V x h and learned positions s x h; the output head is tied to the token table.
int64_t Workload::embedding_parameters() const {
  return int64_t{vocab} * hidden + int64_t{seq_len} * hidden;
}

int64_t Workload::total_parameters() const {
  return int64_t{layers} * parameters_per_layer() + embedding_parameters() + 2 * int64_t{hidden};
}

int64_t Workload::stage_parameters(int layers_in_stage, bool first, bool last) const {
  int64_t p = int64_t{layers_in_stage} * parameters_per_layer();
  if (first) p += embedding_parameters();
  // The last stage holds the final layernorm and, unless it is also the first, its own copy
  // of the tied token table (as Megatron does; the two copies' gradients are summed).
  if (last) p += 2 * int64_t{hidden} + (first ? 0 : int64_t{vocab} * hidden);
  return p;
}

double Workload::sequences_per_replica(int replicas) const {
  return static_cast<double>(global_batch) / replicas;
}

int Workload::micro_batches_per_replica(int replicas) const {
  const int64_t per_step = int64_t{replicas} * micro_batch;
  if (replicas < 1 || global_batch % per_step != 0)
    throw WorkloadError(
        "global_batch " + std::to_string(global_batch) +
        " is not a multiple of replicas x micro_batch = " + std::to_string(per_step));
  return static_cast<int>(global_batch / per_step);
}

// One boundary message: the hidden states of one micro-batch, b x s x h elements at the
// activation precision (the gradient sent backward has the same shape).
double Workload::activation_message_bytes() const {
  return double(micro_batch) * seq_len * hidden * activation_bytes_per_element();
}

// Gradients are kept and all-reduced in fp32 (Megatron's main_grad), 4 bytes a parameter.
double Workload::gradient_bytes(int layers_in_stage, bool first, bool last) const {
  const double table = first != last ? table_gradient_bytes() : 0.0;
  return 4.0 * double(stage_parameters(layers_in_stage, first, last)) - table;
}

double Workload::table_gradient_bytes() const { return 4.0 * double(vocab) * hidden; }

// Forward FLOPs of one layer for one micro-batch (b sequences of s tokens), 2 per MAC:
//   dense:     2 b s (4h^2 + 2hf)      (QKV, projection, two MLP matmuls)
//   attention: 4 b s^2 h               (Q K^T and the weighted sum of V, full s x s)
double Workload::forward_flops_per_layer() const {
  const double b = micro_batch, s = seq_len, h = hidden, f = ffn();
  return 2 * b * s * (4 * h * h + 2 * h * f) + 4 * b * s * s * h;
}

// The output head (logits): 2 b s h V.
double Workload::forward_flops_head() const {
  return 2.0 * micro_batch * seq_len * hidden * double(vocab);
}

// Bytes per parameter: mixed precision 2 (16-bit weights) + 4 (fp32 master) + 4 (fp32
// gradients) + 8 (Adam m and v) = 18; fp32: 4 + 4 + 8 = 16.
double Workload::state_bytes(int layers_in_stage, bool first, bool last) const {
  const double per_param = precision == Precision::FP32 ? 16.0 : 18.0;
  return per_param * double(stage_parameters(layers_in_stage, first, last));
}

// With full recomputation only each layer's input is kept: s b h elements per layer.
// Without: s b h (34 + 5 a s / h) bytes per layer at 16 bits (Korthikanti et al. 2022,
// Table 2), twice that in fp32.
double Workload::activation_bytes_in_flight(int layers_in_stage) const {
  const double sbh = double(seq_len) * micro_batch * hidden;
  const double scale = activation_bytes_per_element() / 2.0;
  if (recompute_activations) return layers_in_stage * sbh * activation_bytes_per_element();
  return layers_in_stage * sbh * (34.0 + 5.0 * heads * double(seq_len) / hidden) * scale;
}

// The full activations of the one layer being (re)computed, plus the logits of the head.
double Workload::working_bytes() const {
  const double sbh = double(seq_len) * micro_batch * hidden;
  const double scale = activation_bytes_per_element() / 2.0;
  return sbh * (34.0 + 5.0 * heads * double(seq_len) / hidden) * scale +
         double(seq_len) * micro_batch * vocab * 4.0;
}

// c_dp: the fp32 gradients of one average stage (the reference: 1.3e9 x 4 x 3/24).
double Workload::paper_c_dp_gb(int stages) const {
  return 4.0 * double(total_parameters()) / stages / 1e9;
}

// c_pp: one replica's whole batch of activations at a stage boundary, s h x sequences.
double Workload::paper_c_pp_gb(int replicas) const {
  return double(seq_len) * hidden * activation_bytes_per_element() *
         sequences_per_replica(replicas) / 1e9;
}

}  // namespace tessel::placement
