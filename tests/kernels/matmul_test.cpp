#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <climits>
#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using namespace testing;

struct Shape {
  int B, T, C, OC;
};

std::vector<double> reference(const std::vector<double>& inp, const std::vector<double>& weight,
                              const std::vector<double>* bias, const Shape& s) {
  std::vector<double> out(size_t(s.B) * s.T * s.OC);
  for (int r = 0; r < s.B * s.T; ++r) {
    for (int o = 0; o < s.OC; ++o) {
      double sum = bias ? (*bias)[o] : 0.0;
      for (int c = 0; c < s.C; ++c) sum += inp[r * s.C + c] * weight[o * s.C + c];
      out[r * s.OC + o] = sum;
    }
  }
  return out;
}

// Rows of 150 and 600 columns cross the 128 x 512 tile edges; K = 1000 is where OpenBLAS's own
// threading would change the result.
const Shape kShapes[] = {{1, 1, 1, 1}, {1, 3, 5, 7}, {3, 50, 70, 600}, {2, 3, 1000, 5}};

TEST(Matmul, ForwardMatchesReferenceWithAndWithoutBias) {
  Rng rng(21);
  for (const Shape& s : kShapes) {
    const auto inp = random_floats(rng, s.B * s.T * s.C);
    const auto weight = random_floats(rng, s.OC * s.C);
    const auto bias = random_floats(rng, s.OC);
    const auto bias_d = to_double(bias);
    std::vector<float> out(s.B * s.T * s.OC);
    // Each term is below 1 in size: the float error of a K-term sum is within K ulp-ish steps.
    const double atol = 1e-6 * (s.C + 1);
    matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), s.B, s.T, s.C, s.OC);
    EXPECT_TRUE(
        all_close(out, reference(to_double(inp), to_double(weight), &bias_d, s), atol, 1e-6))
        << "C=" << s.C << " OC=" << s.OC;
    matmul_forward(out.data(), inp.data(), weight.data(), nullptr, s.B, s.T, s.C, s.OC);
    EXPECT_TRUE(
        all_close(out, reference(to_double(inp), to_double(weight), nullptr, s), atol, 1e-6))
        << "C=" << s.C << " OC=" << s.OC << " no bias";
  }
}

TEST(Matmul, BackwardMatchesFiniteDifferences) {
  Rng rng(22);
  for (const Shape& s : {Shape{1, 1, 1, 1}, Shape{2, 3, 5, 7}, Shape{1, 2, 9, 3}}) {
    const auto inp = random_floats(rng, s.B * s.T * s.C);
    const auto weight = random_floats(rng, s.OC * s.C);
    const auto bias = random_floats(rng, s.OC);
    const auto w = random_floats(rng, s.B * s.T * s.OC);
    auto dinp = random_floats(rng, inp.size());
    auto dweight = random_floats(rng, weight.size());
    auto dbias = random_floats(rng, bias.size());
    const auto dinp0 = dinp, dweight0 = dweight, dbias0 = dbias;
    matmul_backward(dinp.data(), dweight.data(), dbias.data(), w.data(), inp.data(), weight.data(),
                    s.B, s.T, s.C, s.OC);
    const auto x = to_double(inp), W = to_double(weight), b = to_double(bias);
    auto loss = [&](const std::vector<double>& xi, const std::vector<double>& Wi,
                    const std::vector<double>& bi) {
      return weighted_sum(reference(xi, Wi, &bi, s), w);
    };
    const auto num_dinp = numeric_gradient([&](const auto& v) { return loss(v, W, b); }, x);
    const auto num_dweight = numeric_gradient([&](const auto& v) { return loss(x, v, b); }, W);
    const auto num_dbias = numeric_gradient([&](const auto& v) { return loss(x, W, v); }, b);
    EXPECT_TRUE(all_close(dinp, plus(num_dinp, dinp0), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(dweight, plus(num_dweight, dweight0), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(dbias, plus(num_dbias, dbias0), 1e-5, 1e-5));
    // Without a bias, dbias is not touched and the rest is the same.
    auto dinp2 = dinp0, dweight2 = dweight0;
    matmul_backward(dinp2.data(), dweight2.data(), nullptr, w.data(), inp.data(), weight.data(),
                    s.B, s.T, s.C, s.OC);
    EXPECT_TRUE(same_bits(dinp2, dinp));
    EXPECT_TRUE(same_bits(dweight2, dweight));
  }
}

TEST(Matmul, SameBitsForAnyThreadCount) {
  Rng rng(23);
  for (const Shape& s : {Shape{4, 64, 768, 768}, Shape{4, 64, 768, 1000}, Shape{1, 37, 129, 700}}) {
    const auto inp = random_floats(rng, s.B * s.T * s.C);
    const auto weight = random_floats(rng, s.OC * s.C);
    const auto bias = random_floats(rng, s.OC);
    const auto dout = random_floats(rng, s.B * s.T * s.OC);
    expect_same_bits_for_any_thread_count([&] {
      std::vector<float> out(s.B * s.T * s.OC), dinp(inp.size()), dweight(weight.size()),
          dbias(s.OC);
      matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), s.B, s.T, s.C, s.OC);
      matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                      weight.data(), s.B, s.T, s.C, s.OC);
      for (const auto* v : {&dinp, &dweight, &dbias}) out.insert(out.end(), v->begin(), v->end());
      return out;
    });
  }
}

TEST(Matmul, RejectsBadArguments) {
  std::vector<float> f(64);
  float* p = f.data();
  const char* fwd = "matmul_forward";
  expect_invalid([&] { matmul_forward(nullptr, p, p, p, 1, 2, 3, 4); }, {fwd, "'out'"});
  expect_invalid([&] { matmul_forward(p, nullptr, p, p, 1, 2, 3, 4); }, {fwd, "'inp'"});
  expect_invalid([&] { matmul_forward(p, p, nullptr, p, 1, 2, 3, 4); }, {fwd, "'weight'"});
  expect_invalid([&] { matmul_forward(p, p, p, p, 1, 2, 3, 0); }, {fwd, "OC=0"});
  expect_invalid([&] { matmul_forward(p, p, p, p, 65536, 65536, 3, 4); },
                 {fwd, "B*T=4294967296", "BLAS int"});
  const char* bwd = "matmul_backward";
  expect_invalid([&] { matmul_backward(nullptr, p, p, p, p, p, 1, 2, 3, 4); }, {bwd, "'dinp'"});
  expect_invalid([&] { matmul_backward(p, nullptr, p, p, p, p, 1, 2, 3, 4); }, {bwd, "'dweight'"});
  expect_invalid([&] { matmul_backward(p, p, p, nullptr, p, p, 1, 2, 3, 4); }, {bwd, "'dout'"});
  expect_invalid([&] { matmul_backward(p, p, p, p, nullptr, p, 1, 2, 3, 4); }, {bwd, "'inp'"});
  expect_invalid([&] { matmul_backward(p, p, p, p, p, nullptr, 1, 2, 3, 4); }, {bwd, "'weight'"});
  expect_invalid([&] { matmul_backward(p, p, p, p, p, p, 1, -1, 3, 4); }, {bwd, "T=-1"});
}

}  // namespace
}  // namespace tessel::kernels::cpu
