#include "kernels/cpu/simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu::simd {
namespace {

TEST(Simd, Exp4IsWithinTwoUlpOverItsRange) {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.000731) {
    const double exact = std::exp(double(float(x)));
    const double error = std::fabs(double(exp4(splat4(float(x)))[0]) - exact) / exact;
    worst = std::max(worst, error);
  }
  EXPECT_LT(worst, 2 * 0x1.0p-23);  // 2 ulp relative
}

TEST(Simd, Exp4ClampsAndPropagatesNan) {
  const f32x4 e = exp4(f32x4{-std::numeric_limits<float>::infinity(), -1000.0f,
                             std::numeric_limits<float>::quiet_NaN(), 0.0f});
  EXPECT_NEAR(e[0], std::exp(-87.0), 1e-44);
  EXPECT_NEAR(e[1], std::exp(-87.0), 1e-44);
  EXPECT_TRUE(std::isnan(e[2]));
  EXPECT_EQ(e[3], 1.0f);
}

TEST(Simd, Sqrt4EqualsStdSqrt) {
  testing::Rng rng(8);
  for (int i = 0; i < 1000; ++i) {
    const f32x4 x = {rng.uniform(0, 1), rng.uniform(0, 1e6f), rng.uniform(0, 1e-30f), 0.0f};
    const f32x4 r = sqrt4(x);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(r[j], std::sqrt(x[j])) << x[j];
  }
}

TEST(Simd, DotAxpyAndScaleMatchPlainLoopsForEveryTailLength) {
  testing::Rng rng(7);
  for (int n = 1; n <= 19; ++n) {
    const auto a = testing::random_floats(rng, n);
    const auto b = testing::random_floats(rng, n);
    double expected = 0;
    for (int i = 0; i < n; ++i) expected += double(a[i]) * b[i];
    EXPECT_NEAR(dot(a.data(), b.data(), n), expected, 1e-6) << "n=" << n;

    auto y = b;
    axpy(y.data(), 0.5f, a.data(), n);
    auto z = b;
    scale(z.data(), -2.0f, n);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(y[i], b[i] + 0.5f * a[i]) << "n=" << n << " i=" << i;
      EXPECT_EQ(z[i], -2.0f * b[i]) << "n=" << n << " i=" << i;
    }
  }
}

}  // namespace
}  // namespace tessel::kernels::cpu::simd
