#include "kernels/cpu/gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using namespace testing;

double reference(double x) {
  const double s = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(s * (x + 0.044715 * x * x * x)));
}

std::vector<double> reference(const std::vector<double>& x) {
  std::vector<double> out;
  for (double v : x) out.push_back(reference(v));
  return out;
}

TEST(Gelu, ForwardMatchesReference) {
  Rng rng(31);
  for (int64_t n : {1, 3, 4, 37, 100'003}) {  // tails of every length, several chunks
    const auto inp = random_floats(rng, n, -8.0f, 8.0f);
    std::vector<float> out(n);
    gelu_forward(out.data(), inp.data(), n);
    EXPECT_TRUE(all_close(out, reference(to_double(inp)), 1e-6, 1e-6)) << "N=" << n;
  }
  // Known value and the far tails (no NaN, no overflow of x^3, no denormals).
  const std::vector<float> x = {1.0f, 0.0f, -30.0f, 30.0f, -1e4f, 1e4f, -1e20f, 1e20f};
  std::vector<float> out(x.size());
  gelu_forward(out.data(), x.data(), int64_t(x.size()));
  EXPECT_NEAR(out[0], 0.8411919906, 1e-7);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_NEAR(out[2], 0.0, 1e-20);
  EXPECT_EQ(out[3], 30.0f);
  EXPECT_NEAR(out[4], 0.0, 1e-20);
  EXPECT_EQ(out[5], 1e4f);
  EXPECT_NEAR(out[6], 0.0, 1e-10);
  EXPECT_EQ(out[7], 1e20f);
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  Rng rng(32);
  const auto inp = random_floats(rng, 41, -6.0f, 6.0f);
  const auto w = random_floats(rng, inp.size());
  auto dinp = random_floats(rng, inp.size());
  const auto dinp0 = dinp;
  gelu_backward(dinp.data(), inp.data(), w.data(), int64_t(inp.size()));
  const auto numeric = numeric_gradient(
      [&](const std::vector<double>& x) { return weighted_sum(reference(x), w); }, to_double(inp));
  EXPECT_TRUE(all_close(dinp, plus(numeric, dinp0), 1e-6, 1e-5));
  // Far tails: the slope is 0 or 1, finite.
  const std::vector<float> x = {-1e4f, 1e4f, -1e20f, 1e20f};
  const std::vector<float> ones(x.size(), 1.0f);
  std::vector<float> grad(x.size(), 0.0f);
  gelu_backward(grad.data(), x.data(), ones.data(), int64_t(x.size()));
  EXPECT_TRUE(all_close(grad, {0.0, 1.0, 0.0, 1.0}, 1e-12, 0));
}

TEST(Gelu, SameBitsForAnyThreadCount) {
  Rng rng(33);
  const int64_t n = 4 * 64 * 3072 + 3;
  const auto inp = random_floats(rng, n, -5.0f, 5.0f);
  const auto dout = random_floats(rng, n);
  expect_same_bits_for_any_thread_count([&] {
    std::vector<float> out(n), dinp(n);
    gelu_forward(out.data(), inp.data(), n);
    gelu_backward(dinp.data(), inp.data(), dout.data(), n);
    out.insert(out.end(), dinp.begin(), dinp.end());
    return out;
  });
}

TEST(Gelu, RejectsBadArguments) {
  std::vector<float> f(8);
  float* p = f.data();
  expect_invalid([&] { gelu_forward(nullptr, p, 8); }, {"gelu_forward", "'out'"});
  expect_invalid([&] { gelu_forward(p, nullptr, 8); }, {"gelu_forward", "'inp'"});
  expect_invalid([&] { gelu_forward(p, p, 0); }, {"gelu_forward", "N=0"});
  expect_invalid([&] { gelu_backward(nullptr, p, p, 8); }, {"gelu_backward", "'dinp'"});
  expect_invalid([&] { gelu_backward(p, nullptr, p, 8); }, {"gelu_backward", "'inp'"});
  expect_invalid([&] { gelu_backward(p, p, nullptr, 8); }, {"gelu_backward", "'dout'"});
  expect_invalid([&] { gelu_backward(p, p, p, -5); }, {"gelu_backward", "N=-5"});
}

}  // namespace
}  // namespace tessel::kernels::cpu
