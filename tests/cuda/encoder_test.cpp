// Cases for the embedding, and the determinism of its backward pass.
#include "kernels/cpu/encoder.h"

#include <gtest/gtest.h>

#include "kernels/cuda/device.h"
#include "kernels/cuda/encoder.h"
#include "tests/cuda/cuda_test_support.h"

namespace tessel::kernels::cuda::testing {
namespace {

struct EncoderShape {
  int B, T, C, V;
};

// Odd channels and positions; a 3-token vocabulary (long runs of one token in the sorted
// backward); GPT-2's width.
const EncoderShape kShapes[] = {
    {2, 37, 96, 500}, {1, 5, 7, 11}, {3, 50, 40, 3}, {2, 64, 768, 1000}};

std::map<std::string, int64_t> dims(const EncoderShape& s) {
  return {{"B", s.B}, {"T", s.T}, {"C", s.C}, {"V", s.V}};
}

struct EncoderInputs {
  std::vector<int> tokens;
  std::vector<float> wte, wpe;
};

EncoderInputs random_inputs(Rng& rng, const EncoderShape& s) {
  return {cpu::testing::random_ints(rng, int64_t(s.B) * s.T, s.V),
          random_values(rng, int64_t(s.V) * s.C, -1, 1, true),
          random_values(rng, int64_t(s.T + 3) * s.C, -1, 1, true)};  // maxT > T
}

std::vector<OpCase> encoder_cases() {
  std::vector<OpCase> cases;
  for (const EncoderShape s : kShapes) {
    cases.push_back({"encoder_forward", dims(s), "", "int tokens; bf16 wte, wpe, out",
                     [s](Rng& rng, Context& ctx) {
                       const EncoderInputs in = random_inputs(rng, s);
                       std::vector<float> expected(size_t(s.B) * s.T * s.C);
                       cpu::encoder_forward(expected.data(), in.tokens.data(), in.wte.data(),
                                            in.wpe.data(), s.B, s.T, s.C, s.V);
                       DeviceBuffer<int> tokens(in.tokens);
                       Bf16Buffer wte(in.wte), wpe(in.wpe), out(int64_t(expected.size()));
                       out.poison();
                       encoder_forward(out.bf16_data(), tokens.get(), wte.bf16_data(),
                                       wpe.bf16_data(), s.B, s.T, s.C, s.V, ctx);
                       return std::vector{
                           compare("out", out.download_floats(), expected, kBf16Tolerance)};
                     }});
    cases.push_back(
        {"encoder_backward", dims(s), "", "int tokens; bf16 dout; fp32 dwte, dwpe",
         [s](Rng& rng, Context& ctx) {
           const EncoderInputs in = random_inputs(rng, s);
           const auto dout = random_values(rng, int64_t(s.B) * s.T * s.C, -1, 1, true);
           std::vector<float> dwte(in.wte.size(), 0.0f), dwpe(in.wpe.size(), 0.0f);
           cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), in.tokens.data(), s.B, s.T,
                                 s.C, s.V);
           const auto dwte_start = accumulation_start(rng, dwte, false);
           const auto dwpe_start = accumulation_start(rng, dwpe, false);
           DeviceBuffer<int> tokens(in.tokens);
           Bf16Buffer d_dout(dout);
           DeviceBuffer<float> d_dwte(dwte_start), d_dwpe(dwpe_start);
           encoder_backward(d_dwte.get(), d_dwpe.get(), d_dout.bf16_data(), tokens.get(), s.B, s.T,
                            s.C, s.V, ctx);
           return std::vector{
               compare("dwte", d_dwte.download(), sum(dwte_start, dwte), kFp32Tolerance),
               compare("dwpe", d_dwpe.download(), sum(dwpe_start, dwpe), kFp32Tolerance)};
         }});
  }
  return cases;
}

const bool registered = register_op_cases(encoder_cases());

TEST(EncoderBackward, IsBitIdenticalAcrossRuns) {
  if (const auto reason = gpu_unavailable_reason()) GTEST_SKIP() << "no GPU: " << *reason;
  const EncoderShape s{4, 256, 768, 7};  // few tokens: long runs summed in order
  Rng rng(7);
  const EncoderInputs in = random_inputs(rng, s);
  Bf16Buffer dout(random_values(rng, int64_t(s.B) * s.T * s.C, -1, 1, true));
  DeviceBuffer<int> tokens(in.tokens);
  Context ctx(nullptr);
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    DeviceBuffer<float> dwte(std::vector<float>(in.wte.size(), 0.0f));
    DeviceBuffer<float> dwpe(std::vector<float>(in.wpe.size(), 0.0f));
    encoder_backward(dwte.get(), dwpe.get(), dout.bf16_data(), tokens.get(), s.B, s.T, s.C, s.V,
                     ctx);
    const std::vector<float> result = dwte.download();
    if (run == 0) first = result;
    EXPECT_TRUE(cpu::testing::same_bits(result, first)) << "run " << run;
  }
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
