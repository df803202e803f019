#include "kernels/cpu/vector_ops.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using namespace testing;

TEST(VectorOps, ZeroAndScaledAddMatchReference) {
  Rng rng(81);
  for (int64_t n : {1, 3, 4, 37, 100'003}) {
    auto x = random_floats(rng, n);
    zero(x.data(), n);
    EXPECT_TRUE(all_close(x, std::vector<double>(n, 0.0), 0, 0)) << "N=" << n;
    const auto a = random_floats(rng, n);
    auto y = random_floats(rng, n);
    std::vector<double> expected(n);
    for (int64_t i = 0; i < n; ++i) expected[i] = y[i] + double(-0.75f * a[i]);
    scaled_add(y.data(), a.data(), -0.75f, n);
    EXPECT_TRUE(all_close(y, expected, 0, 6e-8)) << "N=" << n;
  }
}

TEST(VectorOps, SameBitsForAnyThreadCount) {
  Rng rng(82);
  const int64_t n = 500'001;
  const auto a = random_floats(rng, n);
  const auto y0 = random_floats(rng, n);
  expect_same_bits_for_any_thread_count([&] {
    auto y = y0;
    scaled_add(y.data(), a.data(), 0.3f, n);
    zero(y.data(), n / 2);
    return y;
  });
}

TEST(VectorOps, RejectsBadArguments) {
  std::vector<float> f(8);
  float* p = f.data();
  expect_invalid([&] { zero(nullptr, 8); }, {"zero", "'x'"});
  expect_invalid([&] { zero(p, 0); }, {"zero", "N=0"});
  expect_invalid([&] { scaled_add(nullptr, p, 1, 8); }, {"scaled_add", "'y'"});
  expect_invalid([&] { scaled_add(p, nullptr, 1, 8); }, {"scaled_add", "'x'"});
  expect_invalid([&] { scaled_add(p, p, 1, -3); }, {"scaled_add", "N=-3"});
}

}  // namespace
}  // namespace tessel::kernels::cpu
