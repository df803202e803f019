// Cases for the cuBLASLt matmuls (with and without bias, GELU fused or not) and their backward
// pass, and the determinism of the bias gradient.
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include "kernels/cpu/gelu.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/matmul.h"
#include "tests/cuda/cuda_test_support.h"

namespace tessel::kernels::cuda::testing {
namespace {

struct MatmulShape {
  int B, T, C, OC;
};

// Odd rows; everything odd (leading dimensions that are no multiple of 8); GPT-2's qkv layer;
// the MLP's fc shape (OC a multiple of 8: the GELU epilogue) against OC = 7 (its fallback).
const MatmulShape kShapes[] = {
    {2, 37, 96, 200}, {1, 5, 7, 3}, {4, 64, 768, 2304}, {2, 33, 64, 256}, {3, 11, 24, 7}};

std::map<std::string, int64_t> dims(const MatmulShape& s) {
  return {{"B", s.B}, {"T", s.T}, {"C", s.C}, {"OC", s.OC}};
}

struct MatmulInputs {
  std::vector<float> inp, weight, bias;
};

MatmulInputs random_inputs(Rng& rng, const MatmulShape& s) {
  return {random_values(rng, int64_t(s.B) * s.T * s.C, -1, 1, true),
          random_values(rng, int64_t(s.OC) * s.C, -1, 1, true),
          random_values(rng, s.OC, -1, 1, true)};
}

std::vector<float> cpu_matmul(const MatmulInputs& in, const MatmulShape& s, bool bias) {
  std::vector<float> out(size_t(s.B) * s.T * s.OC);
  cpu::matmul_forward(out.data(), in.inp.data(), in.weight.data(), bias ? in.bias.data() : nullptr,
                      s.B, s.T, s.C, s.OC);
  return out;
}

std::vector<OpCase> matmul_cases() {
  std::vector<OpCase> cases;
  for (const MatmulShape s : kShapes) {
    for (const bool bias : {true, false}) {
      const std::string variant = bias ? "bias" : "no_bias";
      cases.push_back(
          {"matmul_forward", dims(s), variant, "bf16 inp, weight, bias, out; fp32 accumulation",
           [s, bias](Rng& rng, Context& ctx) {
             const MatmulInputs in = random_inputs(rng, s);
             const auto expected = cpu_matmul(in, s, bias);
             Bf16Buffer inp(in.inp), weight(in.weight), b(in.bias), out(int64_t(expected.size()));
             out.poison();
             matmul_forward(out.bf16_data(), inp.bf16_data(), weight.bf16_data(),
                            bias ? b.bf16_data() : nullptr, s.B, s.T, s.C, s.OC, ctx);
             return std::vector{compare("out", out.download_floats(), expected, kBf16Tolerance)};
           }});
      cases.push_back(
          {"matmul_gelu_forward", dims(s), variant,
           "bf16 inp, weight, bias, out, pre_gelu; fp32 accumulation",
           [s, bias](Rng& rng, Context& ctx) {
             const MatmulInputs in = random_inputs(rng, s);
             const auto pre_gelu = cpu_matmul(in, s, bias);
             std::vector<float> expected(pre_gelu.size());
             cpu::gelu_forward(expected.data(), pre_gelu.data(), int64_t(pre_gelu.size()));
             Bf16Buffer inp(in.inp), weight(in.weight), b(in.bias), out(int64_t(expected.size())),
                 d_pre(int64_t(expected.size()));
             out.poison();
             d_pre.poison();
             matmul_gelu_forward(out.bf16_data(), d_pre.bf16_data(), inp.bf16_data(),
                                 weight.bf16_data(), bias ? b.bf16_data() : nullptr, s.B, s.T, s.C,
                                 s.OC, ctx);
             return std::vector{
                 compare("out", out.download_floats(), expected, kBf16Tolerance),
                 compare("pre_gelu", d_pre.download_floats(), pre_gelu, kBf16Tolerance)};
           }});
      cases.push_back(
          {"matmul_backward", dims(s), variant, "bf16 dout, inp, weight, dinp; fp32 dweight, dbias",
           [s, bias](Rng& rng, Context& ctx) {
             const MatmulInputs in = random_inputs(rng, s);
             const auto dout = random_values(rng, int64_t(s.B) * s.T * s.OC, -1, 1, true);
             std::vector<float> dinp(in.inp.size(), 0.0f), dweight(in.weight.size(), 0.0f),
                 dbias(size_t(s.OC), 0.0f);
             cpu::matmul_backward(dinp.data(), dweight.data(), bias ? dbias.data() : nullptr,
                                  dout.data(), in.inp.data(), in.weight.data(), s.B, s.T, s.C,
                                  s.OC);
             const auto dinp_start = accumulation_start(rng, dinp, true);
             const auto dweight_start = accumulation_start(rng, dweight, false);
             const auto dbias_start = accumulation_start(rng, dbias, false);
             Bf16Buffer d_dinp(dinp_start), d_dout(dout), inp(in.inp), weight(in.weight);
             DeviceBuffer<float> d_dweight(dweight_start), d_dbias(dbias_start);
             matmul_backward(d_dinp.bf16_data(), d_dweight.get(), bias ? d_dbias.get() : nullptr,
                             d_dout.bf16_data(), inp.bf16_data(), weight.bf16_data(), s.B, s.T, s.C,
                             s.OC, ctx);
             std::vector<Comparison> result = {
                 compare("dinp", d_dinp.download_floats(), sum(dinp_start, dinp), kBf16Tolerance),
                 compare("dweight", d_dweight.download(), sum(dweight_start, dweight),
                         kTensorCoreFp32Tolerance)};
             // Without a bias the buffer must stay untouched.
             result.push_back(compare("dbias", d_dbias.download(),
                                      bias ? sum(dbias_start, dbias) : dbias_start,
                                      kFp32Tolerance));
             return result;
           }});
    }
  }
  return cases;
}

const bool registered = register_op_cases(matmul_cases());

TEST(MatmulBackward, BiasGradientIsBitIdenticalAcrossRuns) {
  if (const auto reason = gpu_unavailable_reason()) GTEST_SKIP() << "no GPU: " << *reason;
#ifdef TESSEL_ON_SIMT_EMULATOR
  // 4 row blocks of the bias sums still add partial sums in the fixed order; the GPU's shape
  // (32 blocks) took 95 s of CI under the emulator's sanitizers.
  const MatmulShape s{2, 512, 64, 2304};
#else
  const MatmulShape s{8, 1024, 64, 2304};
#endif
  Rng rng(5);
  const MatmulInputs in = random_inputs(rng, s);
  Bf16Buffer dout(random_values(rng, int64_t(s.B) * s.T * s.OC, -1, 1, true));
  Bf16Buffer inp(in.inp), weight(in.weight), dinp(int64_t(in.inp.size()));
  DeviceBuffer<float> dweight(int64_t(in.weight.size()));
  Context ctx(nullptr);
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    DeviceBuffer<float> dbias(std::vector<float>(size_t(s.OC), 0.0f));
    matmul_backward(dinp.bf16_data(), dweight.get(), dbias.get(), dout.bf16_data(), inp.bf16_data(),
                    weight.bf16_data(), s.B, s.T, s.C, s.OC, ctx);
    const std::vector<float> result = dbias.download();
    if (run == 0) first = result;
    EXPECT_TRUE(cpu::testing::same_bits(result, first)) << "run " << run;
  }
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
