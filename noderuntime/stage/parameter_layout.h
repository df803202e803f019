// What one model chunk holds: its parameter tensors laid out in one flat buffer (the gradients
// in a second buffer of the same layout), and the gradient buckets the data-parallel
// all-reduce sends, each a contiguous slice.
//
// Tied embeddings, as Megatron does it: the token table wte is also the LM head. The chunk of
// virtual stage 0 holds wte (and the position table wpe); the chunk of the last virtual stage
// holds the final layernorm and its own copy of wte, named "lm_head.weight", initialised from
// wte's random stream so both copies start bit-identical. Before the optimizer step each
// replica's two copies' gradients are summed between its first and last stage (the tie
// group), then all-reduced over the data-parallel group like every bucket (gradient_sync.h),
// so both copies receive the same update and stay identical. When one chunk is both first and
// last (a single stage), it holds wte once and both uses accumulate into its one gradient:
// the same sum.
//
// Layout of a chunk's buffer, each tensor contiguous, row-major:
//   [wte (V, C)] [wpe (T, C)]                      virtual stage 0 only
//   h.<l>.ln_1.weight (C), .ln_1.bias (C), .attn.qkv.weight (3C, C), .attn.qkv.bias (3C),
//   .attn.proj.weight (C, C), .attn.proj.bias (C), .ln_2.weight (C), .ln_2.bias (C),
//   .mlp.fc.weight (F, C), .mlp.fc.bias (F), .mlp.proj.weight (C, F), .mlp.proj.bias (C)
//                                                  for each global layer l of the chunk
//   [ln_f.weight (C)] [ln_f.bias (C)] [lm_head.weight (V, C)]   last virtual stage only
//                                                  (lm_head only when not also stage 0)
// Buckets: "wte" and "lm_head" (the tied table: tie group, then data-parallel group), "wpe",
// one per layer "h.<l>", "ln_f" (data-parallel group).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "noderuntime/stage/gpt_config.h"

namespace tessel::stage {

// Which part of the model one chunk (one virtual pipeline stage) is.
struct ChunkSpec {
  int virtual_stage = 0;
  int first_layer = 0;  // global index of its first transformer block
  int num_layers = 0;
  bool embedding = false;  // virtual stage 0: token and position tables
  bool head = false;       // last virtual stage: final layernorm, LM head, loss

  // The last stage's own copy of the tied token table (not when it is also stage 0).
  bool head_copy() const { return head && !embedding; }
  bool operator==(const ChunkSpec&) const = default;
};

// Virtual stage s of a model split into layer_split.size() virtual stages with
// layer_split[s] blocks each. Throws ConfigError when the split does not cover the layers or
// s is out of range.
ChunkSpec chunk_spec(const GptConfig& config, const std::vector<int>& layer_split,
                     int virtual_stage);

// layers blocks over `parts` virtual stages as evenly as possible, the earlier parts taking
// the remainder. Throws ConfigError when parts < 1 or parts > layers.
std::vector<int> even_layer_split(int layers, int parts);

enum class ParameterInit { kNormal, kZeros, kOnes };

struct ParameterTensor {
  std::string name;      // e.g. "h.3.attn.qkv.weight": the checkpoint name too
  std::string init_key;  // the random stream it is drawn from (lm_head.weight uses wte.weight)
  std::vector<int64_t> shape;
  int64_t offset = 0;  // in floats, into the chunk's flat buffer
  int64_t size = 0;
  ParameterInit init = ParameterInit::kZeros;
  float stddev = 0;    // kNormal only
  bool decay = false;  // weight decay applies (matrices), not to biases and layernorms
  // Counted in the global gradient norm: false for lm_head.weight, whose gradient after the
  // tie and the all-reduce equals wte's, which the first stage already counts.
  bool in_norm = true;
};

enum class BucketGroup { kDataParallel, kEmbedding };  // kEmbedding: the tied table

struct GradientBucket {
  std::string name;  // "wte", "wpe", "h.3", "ln_f", "lm_head"
  int64_t offset = 0;
  int64_t size = 0;
  BucketGroup group = BucketGroup::kDataParallel;
};

// Where each tensor of one transformer block starts in a chunk's flat buffers.
struct BlockOffsets {
  int64_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

class ParameterLayout {
 public:
  ParameterLayout(const GptConfig& config, const ChunkSpec& spec);

  const ChunkSpec& spec() const { return spec_; }
  const std::vector<ParameterTensor>& tensors() const { return tensors_; }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  int64_t total() const { return total_; }  // floats in the flat buffer

  // Throws std::out_of_range naming the tensor when the chunk has no tensor of that name.
  const ParameterTensor& tensor(const std::string& name) const;
  int64_t offset(const std::string& name) const { return tensor(name).offset; }
  // Index into buckets() of local block i's bucket, and of the named bucket ("wte", ...).
  int layer_bucket(int local_layer) const { return first_layer_bucket_ + local_layer; }
  // The offsets of local block i's tensors.
  BlockOffsets block_offsets(int local_layer) const;
  int bucket_index(const std::string& name) const;  // throws std::out_of_range

 private:
  void add(std::string name, std::vector<int64_t> shape, ParameterInit init, float stddev,
           bool decay);
  void close_bucket(std::string name, BucketGroup group);

  ChunkSpec spec_;
  std::vector<ParameterTensor> tensors_;
  std::vector<GradientBucket> buckets_;
  std::map<std::string, size_t> by_name_;
  int64_t total_ = 0;
  int64_t bucket_start_ = 0;
  int first_layer_bucket_ = 0;
};

}  // namespace tessel::stage
