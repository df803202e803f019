// The CPU backend of a model chunk (chunk_model.h): forward and backward of one micro-batch over
// the CPU kernels (llm.c's op order) in fp32, parameters and gradients in the two flat buffers of
// its ParameterLayout, AdamW's moments beside them.
//
// The head's backward runs inside the forward: as soon as the loss of a micro-batch is known,
// softmax_cross_entropy turns the logits into their gradient in place and the head is
// back-propagated to the gradient of the chunk's last block output, which is all the
// micro-batch keeps. So the B x T x V logits are one scratch buffer, not a stash per
// micro-batch. The maths is that of a separate backward; only the moment differs. The CUDA
// backend does the same.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "noderuntime/stage/chunk_model.h"
#include "noderuntime/stage/optimizer.h"

namespace tessel::stage {

class GptChunk final : public ChunkModel {
 public:
  // batch: B, sequences per micro-batch. Parameters and moments start zero: see initialize().
  GptChunk(const GptConfig& config, const ChunkSpec& spec, int batch);

  Device device() const override { return Device::kCpu; }
  void initialize(uint64_t seed) override;

  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<float>& grads() { return grads_; }
  const std::vector<float>& grads() const { return grads_; }
  const AdamWState& adam() const { return adam_; }

  ChunkActivations new_activations() const override;
  double forward(ChunkActivations& act, const int* tokens, const int* targets,
                 float dloss) override;
  const float* output(const ChunkActivations& act) const override;
  float* output(ChunkActivations& act);
  void backward(ChunkActivations& act, const int* tokens,
                const std::function<void(int)>& on_block_done) override;
  std::span<std::byte> receive_buffer(ChunkActivations& act, bool gradient) override;
  std::span<const std::byte> send_payload(ChunkActivations& act, bool gradient) override;

  void zero_gradients() override;
  std::span<float> host_gradients(int bucket) override;
  void gradients_reduced(int) override {}  // the sums are already in place
  double gradient_sum_of_squares() override;
  void adamw_step(const kernels::cpu::AdamWHyperparameters& hp, int step,
                  float grad_scale) override;

  ConstHostState state_for_reading() const override {
    return {params_.data(), adam_.m.data(), adam_.v.data()};
  }
  HostState state_for_writing() override {
    return {params_.data(), adam_.m.data(), adam_.v.data()};
  }
  void state_written() override {}

 private:
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

  std::vector<BlockOffsets> blocks_;
  StashOffsets stash_;
  std::vector<float> params_;
  std::vector<float> grads_;
  AdamWState adam_;
  // Scratch shared by the micro-batches (one runs at a time).
  std::vector<float> tmp_, dln_, datty_, dqkv_, dfch_, dfch_gelu_;         // blocks
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_, logits_, dlnf_, losses_;  // head
};

}  // namespace tessel::stage
