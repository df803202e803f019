// Cases for layernorm (plain and fused with the residual add) and its backward pass, and the
// determinism of the parameter gradients.
#include "kernels/cpu/layernorm.h"

#include <gtest/gtest.h>

#include "kernels/cpu/residual.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/layernorm.h"
#include "tests/cuda/cuda_test_support.h"

namespace tessel::kernels::cuda::testing {
namespace {

struct LayerNormShape {
  int B, T, C;
};

const LayerNormShape kShapes[] = {
    {2, 37, 96}, {1, 3, 7}, {3, 33, 100}, {4, 64, 768}, {2, 16, 2048}};

std::map<std::string, int64_t> dims(const LayerNormShape& s) {
  return {{"B", s.B}, {"T", s.T}, {"C", s.C}};
}

struct Forward {
  std::vector<float> out, mean, rstd;
};

Forward cpu_forward(const std::vector<float>& inp, const std::vector<float>& weight,
                    const std::vector<float>& bias, const LayerNormShape& s) {
  const size_t rows = size_t(s.B) * s.T;
  Forward f{std::vector<float>(rows * s.C), std::vector<float>(rows), std::vector<float>(rows)};
  cpu::layernorm_forward(f.out.data(), f.mean.data(), f.rstd.data(), inp.data(), weight.data(),
                         bias.data(), s.B, s.T, s.C);
  return f;
}

std::vector<OpCase> layernorm_cases() {
  std::vector<OpCase> cases;
  for (const LayerNormShape s : kShapes) {
    const int64_t n = int64_t(s.B) * s.T * s.C;
    cases.push_back(
        {"layernorm_forward", dims(s), "", "bf16 inp, weight, bias, out; fp32 mean, rstd",
         [s, n](Rng& rng, Context& ctx) {
           const auto inp = random_values(rng, n, -2, 3, true);  // mean away from 0
           const auto weight = random_values(rng, s.C, 0.5f, 1.5f, true);
           const auto bias = random_values(rng, s.C, -0.5f, 0.5f, true);
           const Forward expected = cpu_forward(inp, weight, bias, s);
           Bf16Buffer d_inp(inp), d_weight(weight), d_bias(bias), d_out(n);
           DeviceBuffer<float> d_mean(int64_t(s.B) * s.T), d_rstd(int64_t(s.B) * s.T);
           d_out.poison();
           d_mean.poison();
           d_rstd.poison();
           layernorm_forward(d_out.bf16_data(), d_mean.get(), d_rstd.get(), d_inp.bf16_data(),
                             d_weight.bf16_data(), d_bias.bf16_data(), s.B, s.T, s.C, ctx);
           return std::vector{compare("out", d_out.download_floats(), expected.out, kBf16Tolerance),
                              compare("mean", d_mean.download(), expected.mean, kFp32Tolerance),
                              compare("rstd", d_rstd.download(), expected.rstd, kFp32Tolerance)};
         }});
    cases.push_back(
        {"residual_layernorm_forward", dims(s), "",
         "bf16 inp1, inp2, weight, bias, residual, out; fp32 mean, rstd",
         [s, n](Rng& rng, Context& ctx) {
           const auto inp1 = random_values(rng, n, -2, 3, true);
           const auto inp2 = random_values(rng, n, -1, 1, true);
           const auto weight = random_values(rng, s.C, 0.5f, 1.5f, true);
           const auto bias = random_values(rng, s.C, -0.5f, 0.5f, true);
           // The documented semantics: the residual is rounded to bf16, then normalised.
           std::vector<float> residual(static_cast<size_t>(n));
           cpu::residual_forward(residual.data(), inp1.data(), inp2.data(), n);
           residual = round_to_bf16(residual);
           const Forward expected = cpu_forward(residual, weight, bias, s);
           Bf16Buffer d_inp1(inp1), d_inp2(inp2), d_weight(weight), d_bias(bias), d_residual(n),
               d_out(n);
           DeviceBuffer<float> d_mean(int64_t(s.B) * s.T), d_rstd(int64_t(s.B) * s.T);
           d_residual.poison();
           d_out.poison();
           residual_layernorm_forward(d_residual.bf16_data(), d_out.bf16_data(), d_mean.get(),
                                      d_rstd.get(), d_inp1.bf16_data(), d_inp2.bf16_data(),
                                      d_weight.bf16_data(), d_bias.bf16_data(), s.B, s.T, s.C, ctx);
           return std::vector{compare("residual", d_residual.download_floats(), residual, 0.0),
                              compare("out", d_out.download_floats(), expected.out, kBf16Tolerance),
                              compare("mean", d_mean.download(), expected.mean, kFp32Tolerance),
                              compare("rstd", d_rstd.download(), expected.rstd, kFp32Tolerance)};
         }});
    cases.push_back(
        {"layernorm_backward", dims(s), "",
         "bf16 dout, inp, weight, dinp; fp32 mean, rstd, dweight, dbias",
         [s, n](Rng& rng, Context& ctx) {
           const auto inp = random_values(rng, n, -2, 3, true);
           const auto weight = random_values(rng, s.C, 0.5f, 1.5f, true);
           const auto bias = random_values(rng, s.C, -0.5f, 0.5f, true);
           const auto dout = random_values(rng, n, -1, 1, true);
           const Forward forward = cpu_forward(inp, weight, bias, s);
           std::vector<float> dinp(size_t(n), 0.0f), dweight(size_t(s.C), 0.0f),
               dbias(size_t(s.C), 0.0f);
           cpu::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(),
                                   inp.data(), weight.data(), forward.mean.data(),
                                   forward.rstd.data(), s.B, s.T, s.C);
           const auto dinp_start = accumulation_start(rng, dinp, true);
           const auto dweight_start = accumulation_start(rng, dweight, false);
           const auto dbias_start = accumulation_start(rng, dbias, false);
           Bf16Buffer d_dinp(dinp_start), d_dout(dout), d_inp(inp), d_weight(weight);
           DeviceBuffer<float> d_dweight(dweight_start), d_dbias(dbias_start), d_mean(forward.mean),
               d_rstd(forward.rstd);
           layernorm_backward(d_dinp.bf16_data(), d_dweight.get(), d_dbias.get(),
                              d_dout.bf16_data(), d_inp.bf16_data(), d_weight.bf16_data(),
                              d_mean.get(), d_rstd.get(), s.B, s.T, s.C, ctx);
           return std::vector{
               compare("dinp", d_dinp.download_floats(), sum(dinp_start, dinp), kBf16Tolerance),
               compare("dweight", d_dweight.download(), sum(dweight_start, dweight),
                       kFp32Tolerance),
               compare("dbias", d_dbias.download(), sum(dbias_start, dbias), kFp32Tolerance)};
         }});
  }
  return cases;
}

const bool registered = register_op_cases(layernorm_cases());

TEST(LayerNormBackward, ParameterGradientsAreBitIdenticalAcrossRuns) {
  if (const auto reason = gpu_unavailable_reason()) GTEST_SKIP() << "no GPU: " << *reason;
  const LayerNormShape s{8, 512, 768};
  const int64_t n = int64_t(s.B) * s.T * s.C;
  Rng rng(11);
  Bf16Buffer inp(random_values(rng, n, -2, 2, true)), dout(random_values(rng, n, -1, 1, true));
  Bf16Buffer weight(random_values(rng, s.C, 0.5f, 1.5f, true)), dinp(n);
  DeviceBuffer<float> mean(random_values(rng, int64_t(s.B) * s.T, -0.1f, 0.1f, false));
  DeviceBuffer<float> rstd(random_values(rng, int64_t(s.B) * s.T, 0.9f, 1.1f, false));
  Context ctx(nullptr);
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    DeviceBuffer<float> dweight(std::vector<float>(size_t(s.C), 0.0f));
    DeviceBuffer<float> dbias(std::vector<float>(size_t(s.C), 0.0f));
    layernorm_backward(dinp.bf16_data(), dweight.get(), dbias.get(), dout.bf16_data(),
                       inp.bf16_data(), weight.bf16_data(), mean.get(), rstd.get(), s.B, s.T, s.C,
                       ctx);
    std::vector<float> result = dweight.download();
    const std::vector<float> db = dbias.download();
    result.insert(result.end(), db.begin(), db.end());
    if (run == 0) first = result;
    EXPECT_TRUE(cpu::testing::same_bits(result, first)) << "run " << run;
  }
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
