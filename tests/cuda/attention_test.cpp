// Cases for the flash-attention style kernels: heads of 64 and 128, sequences shorter than a
// tile, equal to one, ending in a partial tile, and of many tiles.
#include "kernels/cpu/attention.h"

#include <cmath>

#include "kernels/cuda/attention.h"
#include "tests/cuda/cuda_test_support.h"

namespace tessel::kernels::cuda::testing {
namespace {

struct AttentionShape {
  int B, T, C, NH;
};

// T = 300 with heads of 64 spans three query tiles of 128 and five key tiles of 64, the last
// partial. The last has 16 key tiles for its last queries: the running max and sum are rescaled
// many times, and both buffers of the key/value pipeline are reused.
const AttentionShape kShapes[] = {{2, 64, 128, 2},  {1, 100, 256, 2}, {2, 37, 128, 1},
                                  {1, 130, 192, 3}, {1, 1, 64, 1},    {1, 200, 512, 4},
                                  {1, 300, 128, 2}, {1, 1000, 128, 1}};

std::map<std::string, int64_t> dims(const AttentionShape& s) {
  return {{"B", s.B}, {"T", s.T}, {"C", s.C}, {"NH", s.NH}};
}

// lse[b, h, t] = log sum_{t2 <= t} exp(q_t . k_t2 / sqrt(HS)), in double.
std::vector<float> reference_lse(const std::vector<float>& inp, const AttentionShape& s) {
  const int HS = s.C / s.NH;
  const int64_t C3 = 3 * int64_t(s.C);
  std::vector<float> lse(size_t(s.B) * s.NH * s.T);
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.NH; ++h) {
      for (int t = 0; t < s.T; ++t) {
        std::vector<double> scores(size_t(t) + 1);
        double max_score = -INFINITY;
        for (int t2 = 0; t2 <= t; ++t2) {
          double dot = 0;
          for (int d = 0; d < HS; ++d) {
            dot += double(inp[(int64_t(b) * s.T + t) * C3 + h * HS + d]) *
                   inp[(int64_t(b) * s.T + t2) * C3 + s.C + h * HS + d];
          }
          scores[t2] = dot / std::sqrt(double(HS));
          max_score = std::max(max_score, scores[t2]);
        }
        double sum = 0;
        for (const double x : scores) sum += std::exp(x - max_score);
        lse[(size_t(b) * s.NH + h) * s.T + t] = float(max_score + std::log(sum));
      }
    }
  }
  return lse;
}

std::vector<OpCase> attention_cases() {
  std::vector<OpCase> cases;
  for (const AttentionShape s : kShapes) {
    const int64_t n_inp = int64_t(s.B) * s.T * 3 * s.C;
    const int64_t n_out = int64_t(s.B) * s.T * s.C;
    const int64_t n_att = int64_t(s.B) * s.NH * s.T * s.T;
    cases.push_back(
        {"attention_forward", dims(s), "", "bf16 inp, out; fp32 lse", [=](Rng& rng, Context& ctx) {
           const auto inp = random_values(rng, n_inp, -2, 2, true);
           std::vector<float> out(static_cast<size_t>(n_out)), att(static_cast<size_t>(n_att));
           cpu::attention_forward(out.data(), att.data(), inp.data(), s.B, s.T, s.C, s.NH);
           Bf16Buffer d_inp(inp), d_out(n_out);
           DeviceBuffer<float> d_lse(int64_t(s.B) * s.NH * s.T);
           d_out.poison();
           d_lse.poison();
           attention_forward(d_out.bf16_data(), d_lse.get(), d_inp.bf16_data(), s.B, s.T, s.C, s.NH,
                             ctx);
           return std::vector{
               compare("out", d_out.download_floats(), out, kBf16Tolerance),
               compare("lse", d_lse.download(), reference_lse(inp, s), kTensorCoreFp32Tolerance)};
         }});
    cases.push_back(
        {"attention_backward", dims(s), "", "bf16 dout, inp, out, dinp; fp32 lse",
         [=](Rng& rng, Context& ctx) {
           const auto inp = random_values(rng, n_inp, -2, 2, true);
           const auto dout = random_values(rng, n_out, -1, 1, true);
           std::vector<float> out(static_cast<size_t>(n_out)), att(static_cast<size_t>(n_att));
           cpu::attention_forward(out.data(), att.data(), inp.data(), s.B, s.T, s.C, s.NH);
           std::vector<float> dinp(size_t(n_inp), 0.0f);
           cpu::attention_backward(dinp.data(), dout.data(), inp.data(), att.data(), s.B, s.T, s.C,
                                   s.NH);
           const auto start = accumulation_start(rng, dinp, true);
           // The backward reads the forward's bf16 output and its lse.
           Bf16Buffer d_dinp(start), d_dout(dout), d_inp(inp), d_out(round_to_bf16(out));
           DeviceBuffer<float> d_lse(reference_lse(inp, s));
           attention_backward(d_dinp.bf16_data(), d_dout.bf16_data(), d_inp.bf16_data(),
                              d_out.bf16_data(), d_lse.get(), s.B, s.T, s.C, s.NH, ctx);
           return std::vector{compare("dinp", d_dinp.download_floats(), sum(start, dinp),
                                      kAttentionBackwardTolerance)};
         }});
  }
  return cases;
}

const bool registered = register_op_cases(attention_cases());

}  // namespace
}  // namespace tessel::kernels::cuda::testing
