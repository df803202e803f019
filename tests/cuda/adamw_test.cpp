// Cases for AdamW with the clipping scale fused in and the bf16 weight copy, and for the global
// norm; the norm's determinism.
#include "kernels/cpu/adamw.h"

#include <gtest/gtest.h>

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/device.h"
#include "tests/cuda/cuda_test_support.h"

namespace tessel::kernels::cuda::testing {
namespace {

const int64_t kLengths[] = {1000003, 4096, 7};

std::vector<OpCase> adamw_cases() {
  std::vector<OpCase> cases;
  for (const int64_t n : kLengths) {
    cases.push_back({"adamw_update",
                     {{"N", n}},
                     "clipped",
                     "fp32 params, m, v, grads; bf16 params copy",
                     [n](Rng& rng, Context& ctx) {
                       const auto params = random_values(rng, n, -1, 1, false);
                       const auto m = random_values(rng, n, -0.01f, 0.01f, false);
                       const auto v = random_values(rng, n, 0.0f, 1e-4f, false);
                       const auto grads = random_values(rng, n, -0.1f, 0.1f, false);
                       AdamWHyperparameters hp;
                       hp.learning_rate = 1e-3f;
                       const int step = 3;
                       const float grad_scale =
                           0.5f;  // what clip_scale gives for a norm twice max_norm
                       auto p_cpu = params, m_cpu = m, v_cpu = v;
                       cpu::adamw_update(p_cpu.data(), m_cpu.data(), v_cpu.data(), grads.data(), n,
                                         hp, step, grad_scale);
                       DeviceBuffer<float> d_p(params), d_m(m), d_v(v), d_g(grads);
                       Bf16Buffer d_bf16(n);
                       d_bf16.poison();
                       adamw_update(d_p.get(), d_m.get(), d_v.get(), d_g.get(), n, hp, step,
                                    grad_scale, d_bf16.bf16_data(), ctx);
                       return std::vector{compare("params", d_p.download(), p_cpu, kFp32Tolerance),
                                          compare("m", d_m.download(), m_cpu, kFp32Tolerance),
                                          compare("v", d_v.download(), v_cpu, kFp32Tolerance),
                                          compare("params_bf16", d_bf16.download_floats(),
                                                  round_to_bf16(p_cpu), kBf16Tolerance)};
                     }});
    cases.push_back(
        {"sum_of_squares", {{"N", n}}, "", "fp32 x; double result", [n](Rng& rng, Context& ctx) {
           const auto x = random_values(rng, n, -1, 1, false);
           DeviceBuffer<float> d_x(x);
           const double gpu = sum_of_squares(d_x.get(), n, ctx);
           return std::vector{Comparison{
               "sum",
               relative_error(std::vector{gpu}, std::vector{cpu::sum_of_squares(x.data(), n)}),
               kFp32Tolerance}};
         }});
    cases.push_back(
        {"global_norm", {{"N", n}}, "", "fp32 x; double result", [n](Rng& rng, Context& ctx) {
           const auto x = random_values(rng, n, -1, 1, false);
           DeviceBuffer<float> d_x(x);
           const double gpu = global_norm(d_x.get(), n, ctx);
           return std::vector{Comparison{
               "norm", relative_error(std::vector{gpu}, std::vector{cpu::global_norm(x.data(), n)}),
               kFp32Tolerance}};
         }});
  }
  return cases;
}

const bool registered = register_op_cases(adamw_cases());

TEST(AdamW, RejectsANanClipScaleLikeTheCpuTwin) {
  if (const auto reason = gpu_unavailable_reason()) GTEST_SKIP() << "no GPU: " << *reason;
  DeviceBuffer<float> p(8), m(8), v(8), g(8);
  Context ctx(nullptr);
  const float nan_scale = clip_scale(std::numeric_limits<double>::infinity(), 1.0f);
  EXPECT_THROW(adamw_update(p.get(), m.get(), v.get(), g.get(), 8, AdamWHyperparameters{}, 1,
                            nan_scale, nullptr, ctx),
               std::invalid_argument);
}

TEST(GlobalNorm, IsBitIdenticalAcrossRuns) {
  if (const auto reason = gpu_unavailable_reason()) GTEST_SKIP() << "no GPU: " << *reason;
  Rng rng(3);
  const int64_t n = 50'000'017;
  DeviceBuffer<float> x(random_values(rng, n, -1, 1, false));
  Context ctx(nullptr);
  const double first = global_norm(x.get(), n, ctx);
  for (int run = 0; run < 3; ++run) EXPECT_EQ(global_norm(x.get(), n, ctx), first);
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
