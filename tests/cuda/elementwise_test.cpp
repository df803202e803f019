// Cases for the elementwise ops: GELU, residual, zero, scaled_add, copy_to_bf16. Lengths that are
// not multiples of the 8-element vectors, and pointers one element past a 16-byte boundary
// ("misaligned"), exercise the scalar paths.
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/vector_ops.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/vector_ops.h"
#include "tests/cuda/cuda_test_support.h"

namespace tessel::kernels::cuda::testing {
namespace {

struct Length {
  int64_t n;
  int64_t offset;  // elements from the allocation's start: 1 misaligns 16-byte vectors
};

std::string variant_of(const Length& length) { return length.offset == 0 ? "" : "misaligned"; }

const Length kLengths[] = {{1000003, 0}, {4096, 0}, {7, 0}, {4099, 1}};

// Pads v with `offset` zeros in front, for the misaligned cases.
std::vector<float> padded(const std::vector<float>& v, int64_t offset) {
  std::vector<float> p(size_t(offset), 0.0f);
  p.insert(p.end(), v.begin(), v.end());
  return p;
}

std::vector<float> unpadded(std::vector<float> v, int64_t offset) {
  v.erase(v.begin(), v.begin() + offset);
  return v;
}

std::vector<OpCase> gelu_cases() {
  std::vector<OpCase> cases;
  for (const Length len : kLengths) {
    cases.push_back({"gelu_forward",
                     {{"N", len.n}},
                     variant_of(len),
                     "bf16 inp, out",
                     [len](Rng& rng, Context& ctx) {
                       const auto inp = random_values(rng, len.n, -6, 6, true);
                       std::vector<float> expected(inp.size());
                       cpu::gelu_forward(expected.data(), inp.data(), len.n);
                       Bf16Buffer d_inp(padded(inp, len.offset)), d_out(len.n + len.offset);
                       d_out.poison();
                       gelu_forward(d_out.bf16_data(len.offset), d_inp.bf16_data(len.offset), len.n,
                                    ctx);
                       const auto out = unpadded(d_out.download_floats(), len.offset);
                       return std::vector{compare("out", out, expected, kBf16Tolerance)};
                     }});
    cases.push_back({"gelu_backward",
                     {{"N", len.n}},
                     variant_of(len),
                     "bf16 inp, dout, dinp",
                     [len](Rng& rng, Context& ctx) {
                       const auto inp = random_values(rng, len.n, -6, 6, true);
                       const auto dout = random_values(rng, len.n, -1, 1, true);
                       std::vector<float> increment(inp.size(), 0.0f);
                       cpu::gelu_backward(increment.data(), inp.data(), dout.data(), len.n);
                       const auto start = accumulation_start(rng, increment, true);
                       Bf16Buffer d_inp(padded(inp, len.offset)), d_dout(padded(dout, len.offset)),
                           d_dinp(padded(start, len.offset));
                       gelu_backward(d_dinp.bf16_data(len.offset), d_inp.bf16_data(len.offset),
                                     d_dout.bf16_data(len.offset), len.n, ctx);
                       const auto dinp = unpadded(d_dinp.download_floats(), len.offset);
                       return std::vector{
                           compare("dinp", dinp, sum(start, increment), kBf16Tolerance)};
                     }});
  }
  return cases;
}

std::vector<OpCase> residual_cases() {
  std::vector<OpCase> cases;
  for (const Length len : kLengths) {
    cases.push_back({"residual_forward",
                     {{"N", len.n}},
                     variant_of(len),
                     "bf16 inp1, inp2, out",
                     [len](Rng& rng, Context& ctx) {
                       const auto a = random_values(rng, len.n, -1, 1, true);
                       const auto b = random_values(rng, len.n, -1, 1, true);
                       std::vector<float> expected(a.size());
                       cpu::residual_forward(expected.data(), a.data(), b.data(), len.n);
                       Bf16Buffer d_a(padded(a, len.offset)), d_b(padded(b, len.offset)),
                           d_out(len.n + len.offset);
                       d_out.poison();
                       residual_forward(d_out.bf16_data(len.offset), d_a.bf16_data(len.offset),
                                        d_b.bf16_data(len.offset), len.n, ctx);
                       return std::vector{compare("out",
                                                  unpadded(d_out.download_floats(), len.offset),
                                                  expected, kBf16Tolerance)};
                     }});
    cases.push_back(
        {"residual_backward",
         {{"N", len.n}},
         variant_of(len),
         "bf16 dout, dinp1, dinp2",
         [len](Rng& rng, Context& ctx) {
           const auto dout = random_values(rng, len.n, -1, 1, true);
           const auto start1 = accumulation_start(rng, dout, true);
           const auto start2 = accumulation_start(rng, dout, true);
           auto expected1 = start1, expected2 = start2;
           cpu::residual_backward(expected1.data(), expected2.data(), dout.data(), len.n);
           Bf16Buffer d_dout(padded(dout, len.offset)), d1(padded(start1, len.offset)),
               d2(padded(start2, len.offset));
           residual_backward(d1.bf16_data(len.offset), d2.bf16_data(len.offset),
                             d_dout.bf16_data(len.offset), len.n, ctx);
           return std::vector{compare("dinp1", unpadded(d1.download_floats(), len.offset),
                                      expected1, kBf16Tolerance),
                              compare("dinp2", unpadded(d2.download_floats(), len.offset),
                                      expected2, kBf16Tolerance)};
         }});
  }
  return cases;
}

std::vector<OpCase> vector_op_cases() {
  std::vector<OpCase> cases;
  for (const Length len : kLengths) {
    cases.push_back(
        {"zero", {{"N", len.n}}, variant_of(len), "fp32 x", [len](Rng& rng, Context& ctx) {
           const auto x = random_values(rng, len.n + len.offset, -1, 1, false);
           auto expected = x;
           cpu::zero(expected.data() + len.offset, len.n);
           DeviceBuffer<float> d_x(x);
           zero(d_x.get() + len.offset, len.n, ctx);
           return std::vector{compare("x", d_x.download(), expected, kFp32Tolerance)};
         }});
    cases.push_back(
        {"scaled_add", {{"N", len.n}}, variant_of(len), "fp32 y, x", [len](Rng& rng, Context& ctx) {
           const auto y = random_values(rng, len.n, -1, 1, false);
           const auto x = random_values(rng, len.n, -1, 1, false);
           auto expected = y;
           cpu::scaled_add(expected.data(), x.data(), 0.37f, len.n);
           DeviceBuffer<float> d_y(padded(y, len.offset)), d_x(padded(x, len.offset));
           scaled_add(d_y.get() + len.offset, d_x.get() + len.offset, 0.37f, len.n, ctx);
           return std::vector{
               compare("y", unpadded(d_y.download(), len.offset), expected, kFp32Tolerance)};
         }});
    cases.push_back(
        {"copy_to_bf16",
         {{"N", len.n}},
         variant_of(len),
         "fp32 inp, bf16 out",
         [len](Rng& rng, Context& ctx) {
           const auto inp = random_values(rng, len.n, -3, 3, false);
           DeviceBuffer<float> d_inp(padded(inp, len.offset));
           Bf16Buffer d_out(len.n + len.offset);
           d_out.poison();
           copy_to_bf16(d_out.bf16_data(len.offset), d_inp.get() + len.offset, len.n, ctx);
           // Round to nearest even: exactly the host's rounding.
           return std::vector{compare("out", unpadded(d_out.download_floats(), len.offset),
                                      round_to_bf16(inp), 0.0)};
         }});
  }
  return cases;
}

const bool registered = register_op_cases(gelu_cases()) && register_op_cases(residual_cases()) &&
                        register_op_cases(vector_op_cases());

}  // namespace
}  // namespace tessel::kernels::cuda::testing
