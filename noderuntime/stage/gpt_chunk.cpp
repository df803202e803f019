#include "noderuntime/stage/gpt_chunk.h"

#include <cstring>
#include <stdexcept>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/softmax_cross_entropy.h"
#include "kernels/cpu/vector_ops.h"
#include "noderuntime/stage/parameter_init.h"

namespace tessel::stage {

namespace k = kernels::cpu;

GptChunk::GptChunk(const GptConfig& config, const ChunkSpec& spec, int batch)
    : ChunkModel(config, spec, batch) {
  for (int i = 0; i < spec.num_layers; ++i) blocks_.push_back(layout_.block_offsets(i));
  const int64_t BT = int64_t{B_} * T_, BTC = BT * C_, BTF = BT * F_;
  int64_t at = 0;
  auto take = [&](int64_t floats) {
    const int64_t start = at;
    at += floats;
    return start;
  };
  stash_.ln1 = take(BTC);
  stash_.ln1_mean = take(BT);
  stash_.ln1_rstd = take(BT);
  stash_.qkv = take(3 * BTC);
  stash_.atty = take(BTC);
  stash_.att = take(int64_t{B_} * NH_ * T_ * T_);
  stash_.residual2 = take(BTC);
  stash_.ln2 = take(BTC);
  stash_.ln2_mean = take(BT);
  stash_.ln2_rstd = take(BT);
  stash_.fch = take(BTF);
  stash_.fch_gelu = take(BTF);
  stash_.residual3 = take(BTC);
  stash_.total = at;

  params_.assign(layout_.total(), 0.0f);
  grads_.assign(layout_.total(), 0.0f);
  adam_.m.assign(layout_.total(), 0.0f);
  adam_.v.assign(layout_.total(), 0.0f);
  tmp_.resize(BTC);
  dln_.resize(BTC);
  datty_.resize(BTC);
  dqkv_.resize(3 * BTC);
  dfch_.resize(BTF);
  dfch_gelu_.resize(BTF);
  if (spec.head) {
    lnf_.resize(BTC);
    lnf_mean_.resize(BT);
    lnf_rstd_.resize(BT);
    logits_.resize(BT * V_);
    dlnf_.resize(BTC);
    losses_.resize(BT);
  }
}

void GptChunk::initialize(uint64_t seed) {
  initialize_parameters(layout_, seed, params_.data());
  k::zero(adam_.m.data(), layout_.total());
  k::zero(adam_.v.data(), layout_.total());
}

void GptChunk::zero_gradients() { k::zero(grads_.data(), layout_.total()); }

std::span<float> GptChunk::host_gradients(int bucket) {
  const GradientBucket& b = layout_.buckets().at(bucket);
  return {grads_.data() + b.offset, static_cast<size_t>(b.size)};
}

double GptChunk::gradient_sum_of_squares() {
  return stage::gradient_sum_of_squares(layout_, grads_.data());
}

void GptChunk::adamw_step(const kernels::cpu::AdamWHyperparameters& hp, int step,
                          float grad_scale) {
  stage::adamw_step(layout_, params_.data(), adam_, grads_.data(), hp, step, grad_scale);
}

ChunkActivations GptChunk::new_activations() const {
  ChunkActivations act;
  act.input.resize(activation_floats());
  act.grad.resize(activation_floats());
  act.blocks.resize(stash_.total * spec().num_layers);
  if (wire_dtype() == transport::DType::kBF16) {
    const auto n = static_cast<size_t>(activation_floats());
    if (!spec().embedding) {
      act.wire_input.resize(n);
      act.wire_input_grad.resize(n);
    }
    if (!spec().head) {
      act.wire_grad.resize(n);
      act.wire_output.resize(n);
    }
  }
  return act;
}

namespace {

// bf16 bits to fp32 and back (round to nearest even), for the bf16 exchange.
void widen(float* out, const std::vector<uint16_t>& in) {
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t word = uint32_t{in[i]} << 16;
    std::memcpy(out + i, &word, sizeof word);
  }
}

void narrow(std::vector<uint16_t>& out, const float* in) {
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, in + i, sizeof bits);
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0) {
      out[i] = static_cast<uint16_t>((bits >> 16) | 0x40);  // a NaN stays a NaN
    } else {
      out[i] = static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
    }
  }
}

template <class T>
std::span<std::byte> bytes_of(std::vector<T>& v) {
  return std::as_writable_bytes(std::span(v));
}

}  // namespace

std::span<std::byte> GptChunk::receive_buffer(ChunkActivations& act, bool gradient) {
  if (wire_dtype() == transport::DType::kBF16) {
    return bytes_of(gradient ? act.wire_grad : act.wire_input);
  }
  return bytes_of(gradient ? act.grad : act.input);
}

std::span<const std::byte> GptChunk::send_payload(ChunkActivations& act, bool gradient) {
  if (wire_dtype() == transport::DType::kBF16) {
    return bytes_of(gradient ? act.wire_input_grad : act.wire_output);
  }
  if (gradient) return bytes_of(act.grad);
  return std::as_bytes(std::span(output(act), static_cast<size_t>(activation_floats())));
}

const float* GptChunk::output(const ChunkActivations& act) const {
  return act.blocks.data() + (spec().num_layers - 1) * stash_.total + stash_.residual3;
}

float* GptChunk::output(ChunkActivations& act) {
  return act.blocks.data() + (spec().num_layers - 1) * stash_.total + stash_.residual3;
}

double GptChunk::forward(ChunkActivations& act, const int* tokens, const int* targets,
                         float dloss) {
  const float* p = params_.data();
  if (spec().embedding) {
    if (tokens == nullptr) throw std::invalid_argument("GptChunk::forward: tokens is null");
    k::encoder_forward(act.input.data(), tokens, p + layout_.offset("wte.weight"),
                       p + layout_.offset("wpe.weight"), B_, T_, C_, V_);
  }
  if (!spec().embedding && !act.wire_input.empty()) widen(act.input.data(), act.wire_input);
  const int64_t N = activation_floats();
  const float* residual = act.input.data();
  for (int i = 0; i < spec().num_layers; ++i) {
    const BlockOffsets& w = blocks_[i];
    float* s = stash(act, i);
    k::layernorm_forward(s + stash_.ln1, s + stash_.ln1_mean, s + stash_.ln1_rstd, residual,
                         p + w.ln1w, p + w.ln1b, B_, T_, C_);
    k::matmul_forward(s + stash_.qkv, s + stash_.ln1, p + w.qkvw, p + w.qkvb, B_, T_, C_, 3 * C_);
    k::attention_forward(s + stash_.atty, s + stash_.att, s + stash_.qkv, B_, T_, C_, NH_);
    k::matmul_forward(tmp_.data(), s + stash_.atty, p + w.attprojw, p + w.attprojb, B_, T_, C_, C_);
    k::residual_forward(s + stash_.residual2, residual, tmp_.data(), N);
    k::layernorm_forward(s + stash_.ln2, s + stash_.ln2_mean, s + stash_.ln2_rstd,
                         s + stash_.residual2, p + w.ln2w, p + w.ln2b, B_, T_, C_);
    k::matmul_forward(s + stash_.fch, s + stash_.ln2, p + w.fcw, p + w.fcb, B_, T_, C_, F_);
    k::gelu_forward(s + stash_.fch_gelu, s + stash_.fch, int64_t{B_} * T_ * F_);
    k::matmul_forward(tmp_.data(), s + stash_.fch_gelu, p + w.fcprojw, p + w.fcprojb, B_, T_, F_,
                      C_);
    k::residual_forward(s + stash_.residual3, s + stash_.residual2, tmp_.data(), N);
    residual = s + stash_.residual3;
  }
  if (!spec().head) {
    if (!act.wire_output.empty()) narrow(act.wire_output, residual);
    return 0.0;
  }
  if (targets == nullptr) throw std::invalid_argument("GptChunk::forward: targets is null");
  return forward_head(act, residual, targets, dloss);
}

double GptChunk::forward_head(ChunkActivations& act, const float* x, const int* targets,
                              float dloss) {
  const float* p = params_.data();
  float* g = grads_.data();
  const std::string head = spec().head_copy() ? "lm_head.weight" : "wte.weight";
  const int64_t head_offset = layout_.offset(head);
  const int64_t lnfw = layout_.offset("ln_f.weight"), lnfb = layout_.offset("ln_f.bias");
  k::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x, p + lnfw, p + lnfb, B_,
                       T_, C_);
  k::matmul_forward(logits_.data(), lnf_.data(), p + head_offset, nullptr, B_, T_, C_, V_);
  // In place: the logits become their gradient.
  k::softmax_cross_entropy(losses_.data(), logits_.data(), logits_.data(), targets, dloss, B_, T_,
                           V_, k::IgnoreTarget::kNone);
  double loss_sum = 0;
  for (float l : losses_) loss_sum += l;
  k::zero(dlnf_.data(), activation_floats());
  k::matmul_backward(dlnf_.data(), g + head_offset, nullptr, logits_.data(), lnf_.data(),
                     p + head_offset, B_, T_, C_, V_);
  k::zero(act.grad.data(), activation_floats());
  k::layernorm_backward(act.grad.data(), g + lnfw, g + lnfb, dlnf_.data(), x, p + lnfw,
                        lnf_mean_.data(), lnf_rstd_.data(), B_, T_, C_);
  return loss_sum;
}

// act.grad flows down the residual stream in place: it enters a block as the gradient of the
// block's output and leaves as the gradient of its input (the residual adds are identities, so
// each branch's input gradient is accumulated into it).
void GptChunk::backward(ChunkActivations& act, const int* tokens,
                        const std::function<void(int)>& on_block_done) {
  if (!spec().head && !act.wire_grad.empty()) widen(act.grad.data(), act.wire_grad);
  const float* p = params_.data();
  float* g = grads_.data();
  float* dres = act.grad.data();
  const int64_t BTC = activation_floats(), BTF = int64_t{B_} * T_ * F_;
  for (int i = spec().num_layers - 1; i >= 0; --i) {
    const BlockOffsets& w = blocks_[i];
    float* s = stash(act, i);
    const float* residual = i == 0 ? act.input.data() : stash(act, i - 1) + stash_.residual3;
    // MLP branch: residual3 = residual2 + proj(gelu(fc(ln2(residual2)))).
    k::zero(dfch_gelu_.data(), BTF);
    k::matmul_backward(dfch_gelu_.data(), g + w.fcprojw, g + w.fcprojb, dres, s + stash_.fch_gelu,
                       p + w.fcprojw, B_, T_, F_, C_);
    k::zero(dfch_.data(), BTF);
    k::gelu_backward(dfch_.data(), s + stash_.fch, dfch_gelu_.data(), BTF);
    k::zero(dln_.data(), BTC);
    k::matmul_backward(dln_.data(), g + w.fcw, g + w.fcb, dfch_.data(), s + stash_.ln2, p + w.fcw,
                       B_, T_, C_, F_);
    k::layernorm_backward(dres, g + w.ln2w, g + w.ln2b, dln_.data(), s + stash_.residual2,
                          p + w.ln2w, s + stash_.ln2_mean, s + stash_.ln2_rstd, B_, T_, C_);
    // Attention branch: residual2 = residual + proj(attention(qkv(ln1(residual)))).
    k::zero(datty_.data(), BTC);
    k::matmul_backward(datty_.data(), g + w.attprojw, g + w.attprojb, dres, s + stash_.atty,
                       p + w.attprojw, B_, T_, C_, C_);
    k::zero(dqkv_.data(), 3 * BTC);
    k::attention_backward(dqkv_.data(), datty_.data(), s + stash_.qkv, s + stash_.att, B_, T_, C_,
                          NH_);
    k::zero(dln_.data(), BTC);
    k::matmul_backward(dln_.data(), g + w.qkvw, g + w.qkvb, dqkv_.data(), s + stash_.ln1,
                       p + w.qkvw, B_, T_, C_, 3 * C_);
    k::layernorm_backward(dres, g + w.ln1w, g + w.ln1b, dln_.data(), residual, p + w.ln1w,
                          s + stash_.ln1_mean, s + stash_.ln1_rstd, B_, T_, C_);
    if (on_block_done) on_block_done(i);
  }
  if (spec().embedding) {
    if (tokens == nullptr) throw std::invalid_argument("GptChunk::backward: tokens is null");
    k::encoder_backward(g + layout_.offset("wte.weight"), g + layout_.offset("wpe.weight"), dres,
                        tokens, B_, T_, C_, V_);
  } else if (!act.wire_input_grad.empty()) {
    narrow(act.wire_input_grad, dres);
  }
}

}  // namespace tessel::stage
