#include "kernels/cpu/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using namespace testing;

struct State {
  std::vector<double> params, m, v;
};

void reference_step(State& s, const std::vector<float>& grads, const AdamWHyperparameters& hp,
                    int step, double grad_scale) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const double g = grads[i] * grad_scale;
    s.m[i] = hp.beta1 * s.m[i] + (1 - double(hp.beta1)) * g;
    s.v[i] = hp.beta2 * s.v[i] + (1 - double(hp.beta2)) * g * g;
    const double m_hat = s.m[i] / (1 - std::pow(double(hp.beta1), step));
    const double v_hat = s.v[i] / (1 - std::pow(double(hp.beta2), step));
    s.params[i] -=
        hp.learning_rate * (m_hat / (std::sqrt(v_hat) + hp.eps) + hp.weight_decay * s.params[i]);
  }
}

TEST(AdamW, FiveStepsMatchReference) {
  Rng rng(71);
  const int64_t n = 20'011;  // two chunks and a tail
  const AdamWHyperparameters hp{
      .learning_rate = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  auto params = random_floats(rng, n);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  State ref{to_double(params), std::vector<double>(n), std::vector<double>(n)};
  for (int step = 1; step <= 5; ++step) {
    const auto grads = random_floats(rng, n, -0.5f, 0.5f);
    const float scale = step == 3 ? 0.25f : 1.0f;  // a clipped step
    adamw_update(params.data(), m.data(), v.data(), grads.data(), n, hp, step, scale);
    reference_step(ref, grads, hp, step, scale);
  }
  EXPECT_TRUE(all_close(m, ref.m, 1e-7, 1e-5));
  EXPECT_TRUE(all_close(v, ref.v, 1e-9, 1e-5));
  // An update divides m by sqrt(v): where both are tiny the float quotient moves by up to ~1e-4
  // relative, times lr = 1e-2 per step.
  EXPECT_TRUE(all_close(params, ref.params, 5e-6, 1e-6));
}

TEST(AdamW, FirstStepMovesBySignTimesLearningRateAndDecays) {
  const AdamWHyperparameters hp{
      .learning_rate = 0.5f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.2f};
  std::vector<float> params = {1.0f, 1.0f, 2.0f};
  const std::vector<float> grads = {3.0f, -0.001f, 0.0f};
  std::vector<float> m(3, 0.0f), v(3, 0.0f);
  adamw_update(params.data(), m.data(), v.data(), grads.data(), 3, hp, 1, 1.0f);
  // Bias correction makes m_hat = g and v_hat = g^2 on step 1; decay takes lr wd params.
  EXPECT_NEAR(params[0], 1.0 - 0.5 * (1 + 0.2 * 1.0), 1e-6);
  EXPECT_NEAR(params[1], 1.0 - 0.5 * (-1 + 0.2 * 1.0), 1e-5);
  EXPECT_NEAR(params[2], 2.0 - 0.5 * 0.2 * 2.0, 1e-6);
}

TEST(GlobalNorm, MatchesReferenceAndClipScale) {
  Rng rng(72);
  for (int64_t n : {1, 5, 16384, 100'003}) {
    const auto x = random_floats(rng, n, -3.0f, 3.0f);
    double expected = 0;
    for (float v : x) expected += double(v) * v;
    EXPECT_NEAR(sum_of_squares(x.data(), n), expected, 1e-12 * expected) << "N=" << n;
    EXPECT_NEAR(global_norm(x.data(), n), std::sqrt(expected), 1e-12 * std::sqrt(expected));
  }
  EXPECT_EQ(clip_scale(0.5, 1.0f), 1.0f);
  EXPECT_EQ(clip_scale(0.0, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(clip_scale(4.0, 1.0f), 0.25f);
  EXPECT_TRUE(std::isnan(clip_scale(std::numeric_limits<double>::infinity(), 1.0f)));
  EXPECT_TRUE(std::isnan(clip_scale(std::numeric_limits<double>::quiet_NaN(), 1.0f)));
}

TEST(AdamW, SameBitsForAnyThreadCount) {
  Rng rng(73);
  const int64_t n = 1'000'003;
  const auto start = random_floats(rng, n);
  const auto grads = random_floats(rng, n);
  expect_same_bits_for_any_thread_count([&] {
    auto params = start;
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    const float scale = clip_scale(global_norm(grads.data(), n), 100.0f);
    for (int step = 1; step <= 2; ++step) {
      adamw_update(params.data(), m.data(), v.data(), grads.data(), n, AdamWHyperparameters{}, step,
                   scale);
    }
    // The double's bits, as two floats.
    const double squares = sum_of_squares(grads.data(), n);
    float bits[2];
    std::memcpy(bits, &squares, sizeof squares);
    params.insert(params.end(), bits, bits + 2);
    params.push_back(scale);
    return params;
  });
}

TEST(AdamW, RejectsBadArguments) {
  std::vector<float> f(8);
  float* p = f.data();
  const AdamWHyperparameters ok;
  const char* op = "adamw_update";
  expect_invalid([&] { adamw_update(nullptr, p, p, p, 8, ok, 1, 1); }, {op, "'params'"});
  expect_invalid([&] { adamw_update(p, nullptr, p, p, 8, ok, 1, 1); }, {op, "'m'"});
  expect_invalid([&] { adamw_update(p, p, nullptr, p, 8, ok, 1, 1); }, {op, "'v'"});
  expect_invalid([&] { adamw_update(p, p, p, nullptr, 8, ok, 1, 1); }, {op, "'grads'"});
  expect_invalid([&] { adamw_update(p, p, p, p, 0, ok, 1, 1); }, {op, "N=0"});
  expect_invalid([&] { adamw_update(p, p, p, p, 8, ok, 0, 1); }, {op, "step=0"});
  expect_invalid([&] { adamw_update(p, p, p, p, 8, ok, 1, NAN); }, {op, "grad_scale=nan"});
  auto bad = [&](AdamWHyperparameters hp, const char* name) {
    expect_invalid([&] { adamw_update(p, p, p, p, 8, hp, 1, 1); }, {op, name});
  };
  bad({.learning_rate = -1e-3f}, "learning_rate=-0.001");
  bad({.beta1 = 1.0f}, "beta1=1");
  bad({.beta2 = -0.1f}, "beta2=-0.1");
  bad({.eps = 0.0f}, "eps=0");
  bad({.weight_decay = INFINITY}, "weight_decay=inf");
  expect_invalid([&] { sum_of_squares(nullptr, 8); }, {"sum_of_squares", "'x'"});
  expect_invalid([&] { global_norm(p, 0); }, {"sum_of_squares", "N=0"});
  expect_invalid([] { clip_scale(1.0, 0.0f); }, {"clip_scale", "max_norm=0"});
  expect_invalid([] { clip_scale(-1.0, 1.0f); }, {"clip_scale", "norm=-1"});
}

}  // namespace
}  // namespace tessel::kernels::cpu
