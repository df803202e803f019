// One model chunk: a run of GPT-2 blocks, with the embeddings when it is virtual stage 0 and
// the final layernorm, LM head and loss when it is the last. Forward and backward of one
// micro-batch over the CPU kernels (llm.c's op order), parameters and gradients in the two flat
// buffers of its ParameterLayout. Gradients accumulate (+=) across micro-batches; the caller
// zeroes them once per step.
//
// The head's backward runs inside the forward: as soon as the loss of a micro-batch is known,
// softmax_cross_entropy turns the logits into their gradient in place and the head is
// back-propagated to the gradient of the chunk's last block output, which is all the
// micro-batch keeps. So the B x T x V logits are one scratch buffer, not a stash per
// micro-batch. The maths is that of a separate backward; only the moment differs.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "noderuntime/stage/gpt_config.h"
#include "noderuntime/stage/parameter_layout.h"

namespace tessel::stage {

// What one micro-batch leaves in a chunk between its Forward and its Backward.
struct ChunkActivations {
  std::vector<float> input;   // (B, T, C) the received activation, or the embedding output
  std::vector<float> grad;    // (B, T, C) gradient of the chunk's output; the backward turns
                              // it, in place, into the gradient of `input` (sent upstream)
  std::vector<float> blocks;  // every block's saved activations, block_floats() each
};

class GptChunk {
 public:
  // batch: B, sequences per micro-batch. Parameters start zero: see initialize_parameters().
  GptChunk(const GptConfig& config, const ChunkSpec& spec, int batch);

  const GptConfig& config() const { return config_; }
  const ChunkSpec& spec() const { return layout_.spec(); }
  const ParameterLayout& layout() const { return layout_; }
  int batch() const { return B_; }
  int64_t activation_floats() const { return int64_t{B_} * T_ * C_; }  // (B, T, C)

  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<float>& grads() { return grads_; }
  const std::vector<float>& grads() const { return grads_; }

  ChunkActivations new_activations() const;

  // Forward of one micro-batch. tokens (B, T) feed the embedding chunk (ignored otherwise,
  // where act.input holds the received activation); targets (B, T) and dloss (the weight of
  // one position in the mean loss) are used by the head chunk, which also back-propagates the
  // head (see above) into act.grad and returns the sum of the B*T losses (0 elsewhere).
  double forward(ChunkActivations& act, const int* tokens, const int* targets, float dloss);

  // The chunk's output for that micro-batch: (B, T, C), what goes to the next stage.
  const float* output(const ChunkActivations& act) const;
  float* output(ChunkActivations& act);

  // Backward of one micro-batch from act.grad (the output gradient), blocks in reverse;
  // on_block_done(i) runs as soon as local block i's parameter gradients are final for this
  // micro-batch. The embedding chunk ends with the embedding backward (tokens needed);
  // elsewhere act.grad ends as the gradient of act.input.
  void backward(ChunkActivations& act, const int* tokens,
                const std::function<void(int)>& on_block_done);

 private:
  // Where each tensor of one block starts in the parameter (and gradient) buffer.
  struct BlockOffsets {
    int64_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
  };
  // Where each saved activation of one block starts in its part of ChunkActivations::blocks.
  struct StashOffsets {
    int64_t ln1, ln1_mean, ln1_rstd, qkv, atty, att, residual2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, residual3, total;
  };

  // Loss, then the head's backward into act.grad; returns the sum of the B*T losses.
  double forward_head(ChunkActivations& act, const float* x, const int* targets, float dloss);
  float* stash(ChunkActivations& act, int local_layer) const {
    return act.blocks.data() + local_layer * stash_.total;
  }

  GptConfig config_;
  ParameterLayout layout_;
  int B_, T_, C_, NH_, F_, V_;
  std::vector<BlockOffsets> blocks_;
  StashOffsets stash_;
  std::vector<float> params_;
  std::vector<float> grads_;
  // Scratch shared by the micro-batches (one runs at a time).
  std::vector<float> tmp_, dln_, datty_, dqkv_, dfch_, dfch_gelu_;         // blocks
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_, logits_, dlnf_, losses_;  // head
};

}  // namespace tessel::stage
