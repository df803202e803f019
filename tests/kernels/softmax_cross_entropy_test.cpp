#include "kernels/cpu/softmax_cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using namespace testing;

struct Shape {
  int B, T, V;
};

// Per-position losses in double; an ignored (-1) target gives 0.
std::vector<double> reference(const std::vector<double>& logits, const std::vector<int>& targets,
                              const Shape& s) {
  std::vector<double> losses;
  for (int bt = 0; bt < s.B * s.T; ++bt) {
    if (targets[bt] == -1) {
      losses.push_back(0);
      continue;
    }
    const double* x = logits.data() + size_t(bt) * s.V;
    double max_x = x[0];
    for (int v = 1; v < s.V; ++v) max_x = std::max(max_x, x[v]);
    double sum = 0;
    for (int v = 0; v < s.V; ++v) sum += std::exp(x[v] - max_x);
    losses.push_back(std::log(sum) + max_x - x[targets[bt]]);
  }
  return losses;
}

TEST(SoftmaxCrossEntropy, LossesMatchReference) {
  Rng rng(51);
  for (const Shape& s : {Shape{1, 1, 1}, Shape{1, 3, 5}, Shape{3, 17, 33}, Shape{2, 3, 50257}}) {
    // Wide logits (+-20) so the max shift matters.
    const auto logits = random_floats(rng, int64_t(s.B) * s.T * s.V, -20.0f, 20.0f);
    const auto targets = random_ints(rng, s.B * s.T, s.V);
    std::vector<float> losses(s.B * s.T);
    softmax_cross_entropy(losses.data(), nullptr, logits.data(), targets.data(), 1.0f, s.B, s.T,
                          s.V, IgnoreTarget::kNone);
    EXPECT_TRUE(all_close(losses, reference(to_double(logits), targets, s), 1e-5, 1e-5))
        << "V=" << s.V;
  }
  // Equal logits: the loss is log V.
  const std::vector<float> flat(1000, 3.5f);
  const std::vector<int> target = {17};
  float loss = 0;
  softmax_cross_entropy(&loss, nullptr, flat.data(), target.data(), 1.0f, 1, 1, 1000,
                        IgnoreTarget::kNone);
  EXPECT_NEAR(loss, std::log(1000.0), 1e-6);
}

TEST(SoftmaxCrossEntropy, DlogitsMatchFiniteDifferencesAndIgnoreMinusOne) {
  Rng rng(52);
  for (const Shape& s : {Shape{1, 1, 1}, Shape{1, 3, 5}, Shape{2, 4, 7}}) {
    const auto logits = random_floats(rng, s.B * s.T * s.V, -3.0f, 3.0f);
    auto targets = random_ints(rng, s.B * s.T, s.V);
    if (s.B * s.T > 2) targets[1] = -1;  // padding
    const float dloss = 0.37f;
    std::vector<float> losses(s.B * s.T), dlogits(logits.size(), 99.0f);  // overwritten
    softmax_cross_entropy(losses.data(), dlogits.data(), logits.data(), targets.data(), dloss, s.B,
                          s.T, s.V, IgnoreTarget::kMinusOne);
    EXPECT_TRUE(all_close(losses, reference(to_double(logits), targets, s), 1e-6, 1e-6));
    const auto numeric = numeric_gradient(
        [&](const std::vector<double>& x) {
          double total = 0;
          for (double l : reference(x, targets, s)) total += dloss * l;
          return total;
        },
        to_double(logits));
    EXPECT_TRUE(all_close(dlogits, numeric, 1e-6, 1e-5)) << "V=" << s.V;
    if (s.B * s.T > 2) {
      EXPECT_EQ(losses[1], 0.0f);
      for (int v = 0; v < s.V; ++v) EXPECT_EQ(dlogits[s.V + v], 0.0f);
    }
  }
}

TEST(SoftmaxCrossEntropy, InPlaceEqualsSeparateBuffers) {
  Rng rng(53);
  const Shape s{2, 5, 1003};
  const auto logits = random_floats(rng, s.B * s.T * s.V, -5.0f, 5.0f);
  auto targets = random_ints(rng, s.B * s.T, s.V);
  targets[4] = -1;
  std::vector<float> losses(s.B * s.T), dlogits(logits.size());
  softmax_cross_entropy(losses.data(), dlogits.data(), logits.data(), targets.data(), 0.1f, s.B,
                        s.T, s.V, IgnoreTarget::kMinusOne);
  auto in_place = logits;
  std::vector<float> losses_in_place(s.B * s.T);
  softmax_cross_entropy(losses_in_place.data(), in_place.data(), in_place.data(), targets.data(),
                        0.1f, s.B, s.T, s.V, IgnoreTarget::kMinusOne);
  EXPECT_TRUE(same_bits(in_place, dlogits));
  EXPECT_TRUE(same_bits(losses_in_place, losses));
}

TEST(SoftmaxCrossEntropy, SameBitsForAnyThreadCount) {
  Rng rng(54);
  const Shape s{4, 64, 5003};
  const auto logits = random_floats(rng, s.B * s.T * s.V, -8.0f, 8.0f);
  auto targets = random_ints(rng, s.B * s.T, s.V);
  targets[7] = -1;
  expect_same_bits_for_any_thread_count([&] {
    std::vector<float> losses(s.B * s.T), dlogits(logits.size());
    softmax_cross_entropy(losses.data(), dlogits.data(), logits.data(), targets.data(), 1.0f / 255,
                          s.B, s.T, s.V, IgnoreTarget::kMinusOne);
    losses.insert(losses.end(), dlogits.begin(), dlogits.end());
    return losses;
  });
}

TEST(SoftmaxCrossEntropy, RejectsBadArguments) {
  std::vector<float> f(64);
  float* p = f.data();
  std::vector<int> targets = {0, 3, -1, 1};
  const int* t = targets.data();
  const char* op = "softmax_cross_entropy";
  const auto none = IgnoreTarget::kNone;
  const auto minus_one = IgnoreTarget::kMinusOne;
  expect_invalid([&] { softmax_cross_entropy(nullptr, p, p, t, 1, 1, 4, 4, minus_one); },
                 {op, "'losses'"});
  expect_invalid([&] { softmax_cross_entropy(p, p, nullptr, t, 1, 1, 4, 4, minus_one); },
                 {op, "'logits'"});
  expect_invalid([&] { softmax_cross_entropy(p, p, p, nullptr, 1, 1, 4, 4, minus_one); },
                 {op, "'targets'"});
  expect_invalid([&] { softmax_cross_entropy(p, p, p, t, 1, 1, 4, 0, minus_one); }, {op, "V=0"});
  expect_invalid([&] { softmax_cross_entropy(p, p, p, t, 1, 1, 4, 4, none); },
                 {op, "targets[2]=-1", "V=4"});
  expect_invalid([&] { softmax_cross_entropy(p, p, p, t, 1, 1, 4, 3, minus_one); },
                 {op, "targets[1]=3", "V=3", "not -1"});
  targets[0] = -2;
  expect_invalid([&] { softmax_cross_entropy(p, p, p, t, 1, 1, 4, 4, minus_one); },
                 {op, "targets[0]=-2"});
}

}  // namespace
}  // namespace tessel::kernels::cpu
