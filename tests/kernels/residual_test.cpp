#include "kernels/cpu/residual.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using namespace testing;

std::vector<double> reference(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

TEST(Residual, ForwardMatchesReference) {
  Rng rng(61);
  for (int64_t n : {1, 3, 4, 37, 100'003}) {
    const auto a = random_floats(rng, n), b = random_floats(rng, n);
    std::vector<float> out(n);
    residual_forward(out.data(), a.data(), b.data(), n);
    EXPECT_TRUE(all_close(out, reference(to_double(a), to_double(b)), 0, 6e-8)) << "N=" << n;
  }
}

TEST(Residual, BackwardMatchesFiniteDifferences) {
  Rng rng(62);
  const int64_t n = 23;
  const auto a = random_floats(rng, n), b = random_floats(rng, n), w = random_floats(rng, n);
  auto da = random_floats(rng, n), db = random_floats(rng, n);
  const auto da0 = da, db0 = db;
  residual_backward(da.data(), db.data(), w.data(), n);
  const auto num_da = numeric_gradient(
      [&](const std::vector<double>& x) { return weighted_sum(reference(x, to_double(b)), w); },
      to_double(a));
  const auto num_db = numeric_gradient(
      [&](const std::vector<double>& x) { return weighted_sum(reference(to_double(a), x), w); },
      to_double(b));
  EXPECT_TRUE(all_close(da, plus(num_da, da0), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(db, plus(num_db, db0), 1e-6, 1e-6));
}

TEST(Residual, SameBitsForAnyThreadCount) {
  Rng rng(63);
  const int64_t n = 4 * 64 * 768 + 1;
  const auto a = random_floats(rng, n), b = random_floats(rng, n), dout = random_floats(rng, n);
  expect_same_bits_for_any_thread_count([&] {
    std::vector<float> out(n), da(n), db(n);
    residual_forward(out.data(), a.data(), b.data(), n);
    residual_backward(da.data(), db.data(), dout.data(), n);
    out.insert(out.end(), da.begin(), da.end());
    out.insert(out.end(), db.begin(), db.end());
    return out;
  });
}

TEST(Residual, RejectsBadArguments) {
  std::vector<float> f(8);
  float* p = f.data();
  expect_invalid([&] { residual_forward(nullptr, p, p, 8); }, {"residual_forward", "'out'"});
  expect_invalid([&] { residual_forward(p, nullptr, p, 8); }, {"residual_forward", "'inp1'"});
  expect_invalid([&] { residual_forward(p, p, nullptr, 8); }, {"residual_forward", "'inp2'"});
  expect_invalid([&] { residual_forward(p, p, p, 0); }, {"residual_forward", "N=0"});
  expect_invalid([&] { residual_backward(nullptr, p, p, 8); }, {"residual_backward", "'dinp1'"});
  expect_invalid([&] { residual_backward(p, nullptr, p, 8); }, {"residual_backward", "'dinp2'"});
  expect_invalid([&] { residual_backward(p, p, nullptr, 8); }, {"residual_backward", "'dout'"});
}

}  // namespace
}  // namespace tessel::kernels::cpu
