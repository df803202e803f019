// The ops composed as the stage runtime composes them (noderuntime/stage/gpt_chunk.cpp): a
// one-layer GPT with tied embeddings, forward to the loss and backward to every parameter's
// gradient, once with the CUDA ops in bf16 and once with the CPU twins in fp32 on the same
// bf16-rounded weights. The op cases check each op alone; this checks that their contracts fit
// together (layouts, what each backward reads of its forward, which outputs are += and which =)
// and that bf16 activations through a whole step stay within a stated tolerance. The CUDA side
// uses the fused forms (residual + layernorm, matmul + GELU) that a GPU stage would.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/softmax_cross_entropy.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/softmax_cross_entropy.h"
#include "tests/cuda/cuda_test_support.h"

namespace tessel::kernels::cuda::testing {
namespace {

constexpr int B = 2, T = 37, C = 128, NH = 2, V = 97, F = 4 * C;
constexpr int64_t BT = int64_t(B) * T;
// Relative L2 error of the loss and of each gradient. Every activation is rounded to bf16
// (relative 2^-9) at each of about twenty ops between the loss and the first layer, and the
// errors add up along the way (on the SIMT emulator the largest is 0.7%, ln1w's); a wrong layout,
// a missed += or a missed zeroing gives errors of 0.4 and more.
constexpr double kLossTolerance = 1e-2;
constexpr double kGradientTolerance = 5e-2;

// The model's fp32 parameters by name, with their sizes.
const std::map<std::string, int64_t> kShapes = {{"wte", int64_t(V) * C},
                                                {"wpe", int64_t(T) * C},
                                                {"ln1w", C},
                                                {"ln1b", C},
                                                {"qkvw", int64_t(3) * C* C},
                                                {"qkvb", 3 * C},
                                                {"attprojw", C* C},
                                                {"attprojb", C},
                                                {"ln2w", C},
                                                {"ln2b", C},
                                                {"fcw", int64_t(F) * C},
                                                {"fcb", F},
                                                {"fcprojw", int64_t(C) * F},
                                                {"fcprojb", C},
                                                {"lnfw", C},
                                                {"lnfb", C}};

using Tensors = std::map<std::string, std::vector<float>>;

// Weights as GPT-2 starts them, rounded to bf16: what both sides compute with.
Tensors initial_parameters(Rng& rng) {
  Tensors p;
  for (const auto& [name, n] : kShapes) {
    const bool norm_weight = name == "ln1w" || name == "ln2w" || name == "lnfw";
    const bool norm_bias = name == "ln1b" || name == "ln2b" || name == "lnfb";
    p[name] = norm_weight ? random_values(rng, n, 0.8f, 1.2f, true)
              : norm_bias ? random_values(rng, n, -0.1f, 0.1f, true)
                          : random_values(rng, n, -0.08f, 0.08f, true);
  }
  return p;
}

struct StepResult {
  double loss = 0;  // mean over the B*T positions
  Tensors grads;
};

std::vector<float> zeros(int64_t n) { return std::vector<float>(size_t(n), 0.0f); }

StepResult cpu_step(const Tensors& p, const std::vector<int>& tokens,
                    const std::vector<int>& targets) {
  auto at = [&](const char* name) { return p.at(name).data(); };
  std::vector<float> x0(BT * C), ln1(BT * C), mean1(BT), rstd1(BT), qkv(BT * 3 * C),
      att(int64_t(B) * NH * T * T), atty(BT * C), proj(BT * C), x1(BT * C), ln2(BT * C), mean2(BT),
      rstd2(BT), fch(BT * F), fch_gelu(BT * F), x2(BT * C), lnf(BT * C), meanf(BT), rstdf(BT),
      logits(BT * V), losses(BT);
  cpu::encoder_forward(x0.data(), tokens.data(), at("wte"), at("wpe"), B, T, C, V);
  cpu::layernorm_forward(ln1.data(), mean1.data(), rstd1.data(), x0.data(), at("ln1w"), at("ln1b"),
                         B, T, C);
  cpu::matmul_forward(qkv.data(), ln1.data(), at("qkvw"), at("qkvb"), B, T, C, 3 * C);
  cpu::attention_forward(atty.data(), att.data(), qkv.data(), B, T, C, NH);
  cpu::matmul_forward(proj.data(), atty.data(), at("attprojw"), at("attprojb"), B, T, C, C);
  cpu::residual_forward(x1.data(), x0.data(), proj.data(), BT * C);
  cpu::layernorm_forward(ln2.data(), mean2.data(), rstd2.data(), x1.data(), at("ln2w"), at("ln2b"),
                         B, T, C);
  cpu::matmul_forward(fch.data(), ln2.data(), at("fcw"), at("fcb"), B, T, C, F);
  cpu::gelu_forward(fch_gelu.data(), fch.data(), BT * F);
  cpu::matmul_forward(proj.data(), fch_gelu.data(), at("fcprojw"), at("fcprojb"), B, T, F, C);
  cpu::residual_forward(x2.data(), x1.data(), proj.data(), BT * C);
  cpu::layernorm_forward(lnf.data(), meanf.data(), rstdf.data(), x2.data(), at("lnfw"), at("lnfb"),
                         B, T, C);
  cpu::matmul_forward(logits.data(), lnf.data(), at("wte"), nullptr, B, T, C, V);
  cpu::softmax_cross_entropy(losses.data(), logits.data(), logits.data(), targets.data(),
                             1.0f / float(BT), B, T, V, cpu::IgnoreTarget::kNone);

  StepResult r;
  for (const float l : losses) r.loss += l / double(BT);
  for (const auto& [name, n] : kShapes) r.grads[name] = zeros(n);
  auto g = [&](const char* name) { return r.grads[name].data(); };
  std::vector<float> dlnf = zeros(BT * C), dx = zeros(BT * C), dfch_gelu = zeros(BT * F),
                     dfch = zeros(BT * F), dln = zeros(BT * C), datty = zeros(BT * C),
                     dqkv = zeros(BT * 3 * C);
  cpu::matmul_backward(dlnf.data(), g("wte"), nullptr, logits.data(), lnf.data(), at("wte"), B, T,
                       C, V);
  cpu::layernorm_backward(dx.data(), g("lnfw"), g("lnfb"), dlnf.data(), x2.data(), at("lnfw"),
                          meanf.data(), rstdf.data(), B, T, C);
  cpu::matmul_backward(dfch_gelu.data(), g("fcprojw"), g("fcprojb"), dx.data(), fch_gelu.data(),
                       at("fcprojw"), B, T, F, C);
  cpu::gelu_backward(dfch.data(), fch.data(), dfch_gelu.data(), BT * F);
  cpu::matmul_backward(dln.data(), g("fcw"), g("fcb"), dfch.data(), ln2.data(), at("fcw"), B, T, C,
                       F);
  cpu::layernorm_backward(dx.data(), g("ln2w"), g("ln2b"), dln.data(), x1.data(), at("ln2w"),
                          mean2.data(), rstd2.data(), B, T, C);
  cpu::matmul_backward(datty.data(), g("attprojw"), g("attprojb"), dx.data(), atty.data(),
                       at("attprojw"), B, T, C, C);
  cpu::attention_backward(dqkv.data(), datty.data(), qkv.data(), att.data(), B, T, C, NH);
  dln = zeros(BT * C);
  cpu::matmul_backward(dln.data(), g("qkvw"), g("qkvb"), dqkv.data(), ln1.data(), at("qkvw"), B, T,
                       C, 3 * C);
  cpu::layernorm_backward(dx.data(), g("ln1w"), g("ln1b"), dln.data(), x0.data(), at("ln1w"),
                          mean1.data(), rstd1.data(), B, T, C);
  cpu::encoder_backward(g("wte"), g("wpe"), dx.data(), tokens.data(), B, T, C, V);
  return r;
}

StepResult cuda_step(const Tensors& p, const std::vector<int>& tokens,
                     const std::vector<int>& targets, Context& ctx) {
  std::map<std::string, Bf16Buffer> w;
  for (const auto& [name, values] : p) w.try_emplace(name, values);
  auto at = [&](const char* name) { return w.at(name).bf16_data(); };
  DeviceBuffer<int> d_tokens(tokens), d_targets(targets);
  Bf16Buffer x0(BT * C), ln1(BT * C), qkv(BT * 3 * C), atty(BT * C), proj(BT * C), x1(BT * C),
      ln2(BT * C), fch(BT * F), fch_gelu(BT * F), x2(BT * C), lnf(BT * C), logits(BT * V);
  DeviceBuffer<float> mean1(BT), rstd1(BT), lse(int64_t(B) * NH * T), mean2(BT), rstd2(BT),
      meanf(BT), rstdf(BT), losses(BT);
  encoder_forward(x0.bf16_data(), d_tokens.get(), at("wte"), at("wpe"), B, T, C, V, ctx);
  layernorm_forward(ln1.bf16_data(), mean1.get(), rstd1.get(), x0.bf16_data(), at("ln1w"),
                    at("ln1b"), B, T, C, ctx);
  matmul_forward(qkv.bf16_data(), ln1.bf16_data(), at("qkvw"), at("qkvb"), B, T, C, 3 * C, ctx);
  attention_forward(atty.bf16_data(), lse.get(), qkv.bf16_data(), B, T, C, NH, ctx);
  matmul_forward(proj.bf16_data(), atty.bf16_data(), at("attprojw"), at("attprojb"), B, T, C, C,
                 ctx);
  residual_layernorm_forward(x1.bf16_data(), ln2.bf16_data(), mean2.get(), rstd2.get(),
                             x0.bf16_data(), proj.bf16_data(), at("ln2w"), at("ln2b"), B, T, C,
                             ctx);
  matmul_gelu_forward(fch_gelu.bf16_data(), fch.bf16_data(), ln2.bf16_data(), at("fcw"), at("fcb"),
                      B, T, C, F, ctx);
  matmul_forward(proj.bf16_data(), fch_gelu.bf16_data(), at("fcprojw"), at("fcprojb"), B, T, F, C,
                 ctx);
  residual_layernorm_forward(x2.bf16_data(), lnf.bf16_data(), meanf.get(), rstdf.get(),
                             x1.bf16_data(), proj.bf16_data(), at("lnfw"), at("lnfb"), B, T, C,
                             ctx);
  matmul_forward(logits.bf16_data(), lnf.bf16_data(), at("wte"), nullptr, B, T, C, V, ctx);
  softmax_cross_entropy(losses.get(), logits.bf16_data(), logits.bf16_data(), d_targets.get(),
                        1.0f / float(BT), B, T, V, IgnoreTarget::kNone, ctx);

  std::map<std::string, DeviceBuffer<float>> g;
  for (const auto& [name, n] : kShapes) g.try_emplace(name, zeros(n));
  auto grad = [&](const char* name) { return g.at(name).get(); };
  // The backward ops add into their input gradients: start them from zero.
  Bf16Buffer dlnf(zeros(BT * C)), dx(zeros(BT * C)), dfch_gelu(zeros(BT * F)), dfch(zeros(BT * F)),
      dln(zeros(BT * C)), datty(zeros(BT * C)), dqkv(zeros(BT * 3 * C));
  matmul_backward(dlnf.bf16_data(), grad("wte"), nullptr, logits.bf16_data(), lnf.bf16_data(),
                  at("wte"), B, T, C, V, ctx);
  layernorm_backward(dx.bf16_data(), grad("lnfw"), grad("lnfb"), dlnf.bf16_data(), x2.bf16_data(),
                     at("lnfw"), meanf.get(), rstdf.get(), B, T, C, ctx);
  matmul_backward(dfch_gelu.bf16_data(), grad("fcprojw"), grad("fcprojb"), dx.bf16_data(),
                  fch_gelu.bf16_data(), at("fcprojw"), B, T, F, C, ctx);
  gelu_backward(dfch.bf16_data(), fch.bf16_data(), dfch_gelu.bf16_data(), BT * F, ctx);
  matmul_backward(dln.bf16_data(), grad("fcw"), grad("fcb"), dfch.bf16_data(), ln2.bf16_data(),
                  at("fcw"), B, T, C, F, ctx);
  layernorm_backward(dx.bf16_data(), grad("ln2w"), grad("ln2b"), dln.bf16_data(), x1.bf16_data(),
                     at("ln2w"), mean2.get(), rstd2.get(), B, T, C, ctx);
  matmul_backward(datty.bf16_data(), grad("attprojw"), grad("attprojb"), dx.bf16_data(),
                  atty.bf16_data(), at("attprojw"), B, T, C, C, ctx);
  attention_backward(dqkv.bf16_data(), datty.bf16_data(), qkv.bf16_data(), atty.bf16_data(),
                     lse.get(), B, T, C, NH, ctx);
  dln.upload_floats(zeros(BT * C));
  matmul_backward(dln.bf16_data(), grad("qkvw"), grad("qkvb"), dqkv.bf16_data(), ln1.bf16_data(),
                  at("qkvw"), B, T, C, 3 * C, ctx);
  layernorm_backward(dx.bf16_data(), grad("ln1w"), grad("ln1b"), dln.bf16_data(), x0.bf16_data(),
                     at("ln1w"), mean1.get(), rstd1.get(), B, T, C, ctx);
  encoder_backward(grad("wte"), grad("wpe"), dx.bf16_data(), d_tokens.get(), B, T, C, V, ctx);
  TESSEL_CUDA_CHECK(cudaDeviceSynchronize());

  StepResult r;
  for (const float l : losses.download()) r.loss += l / double(BT);
  for (const auto& [name, buffer] : g) r.grads[name] = buffer.download();
  return r;
}

TEST(GptStep, OneLayerForwardAndBackwardMatchTheCpuOps) {
  if (const auto reason = gpu_unavailable_reason()) GTEST_SKIP() << "no GPU: " << *reason;
  Rng rng(20261124);
  const Tensors p = initial_parameters(rng);
  const std::vector<int> tokens = cpu::testing::random_ints(rng, BT, V);
  const std::vector<int> targets = cpu::testing::random_ints(rng, BT, V);
  const StepResult expected = cpu_step(p, tokens, targets);
  Context ctx(nullptr);
  const StepResult actual = cuda_step(p, tokens, targets, ctx);

  EXPECT_LE(std::abs(actual.loss - expected.loss) / expected.loss, kLossTolerance)
      << "loss " << actual.loss << " against the CPU's " << expected.loss;
  for (const auto& [name, grad] : expected.grads) {
    const double error = relative_error(actual.grads.at(name), grad);
    EXPECT_LE(error, kGradientTolerance) << "gradient of " << name;
    RecordProperty("error_" + name, std::to_string(error));
  }
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
