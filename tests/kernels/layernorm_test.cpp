#include "kernels/cpu/layernorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using namespace testing;

struct Shape {
  int B, T, C;
};

struct Reference {
  std::vector<double> out, mean, rstd;
};

Reference reference(const std::vector<double>& inp, const std::vector<double>& weight,
                    const std::vector<double>& bias, const Shape& s) {
  Reference r{std::vector<double>(inp.size()), {}, {}};
  for (int row = 0; row < s.B * s.T; ++row) {
    const double* x = inp.data() + row * s.C;
    double mean = 0, var = 0;
    for (int c = 0; c < s.C; ++c) mean += x[c] / s.C;
    for (int c = 0; c < s.C; ++c) var += (x[c] - mean) * (x[c] - mean) / s.C;
    const double rstd = 1 / std::sqrt(var + kLayerNormEps);
    for (int c = 0; c < s.C; ++c) {
      r.out[row * s.C + c] = (x[c] - mean) * rstd * weight[c] + bias[c];
    }
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
  }
  return r;
}

TEST(LayerNorm, ForwardMatchesReference) {
  Rng rng(11);
  for (const Shape& s : {Shape{1, 1, 1}, Shape{1, 5, 3}, Shape{3, 17, 33}, Shape{2, 64, 768}}) {
    // Rows off centre (mean 3) to exercise the variance's cancellation.
    const auto inp = random_floats(rng, s.B * s.T * s.C, 2.0f, 4.0f);
    const auto weight = random_floats(rng, s.C);
    const auto bias = random_floats(rng, s.C);
    std::vector<float> out(inp.size()), mean(s.B * s.T), rstd(s.B * s.T);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                      s.B, s.T, s.C);
    const Reference r = reference(to_double(inp), to_double(weight), to_double(bias), s);
    EXPECT_TRUE(all_close(out, r.out, 1e-5, 1e-5)) << "C=" << s.C;
    EXPECT_TRUE(all_close(mean, r.mean, 0, 1e-6)) << "C=" << s.C;
    EXPECT_TRUE(all_close(rstd, r.rstd, 0, 1e-5)) << "C=" << s.C;
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  Rng rng(12);
  for (const Shape& s : {Shape{1, 1, 1}, Shape{1, 3, 5}, Shape{2, 3, 9}}) {
    const auto inp = random_floats(rng, s.B * s.T * s.C);
    const auto weight = random_floats(rng, s.C);
    const auto bias = random_floats(rng, s.C);
    const auto w = random_floats(rng, inp.size());
    std::vector<float> out(inp.size()), mean(s.B * s.T), rstd(s.B * s.T);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                      s.B, s.T, s.C);
    auto dinp = random_floats(rng, inp.size());
    auto dweight = random_floats(rng, s.C);
    auto dbias = random_floats(rng, s.C);
    const auto dinp0 = dinp, dweight0 = dweight, dbias0 = dbias;
    layernorm_backward(dinp.data(), dweight.data(), dbias.data(), w.data(), inp.data(),
                       weight.data(), mean.data(), rstd.data(), s.B, s.T, s.C);
    const auto x = to_double(inp), g = to_double(weight), b = to_double(bias);
    auto loss = [&](const std::vector<double>& xi, const std::vector<double>& gi,
                    const std::vector<double>& bi) {
      return weighted_sum(reference(xi, gi, bi, s).out, w);
    };
    const auto num_dinp = numeric_gradient([&](const auto& v) { return loss(v, g, b); }, x);
    const auto num_dweight = numeric_gradient([&](const auto& v) { return loss(x, v, b); }, g);
    const auto num_dbias = numeric_gradient([&](const auto& v) { return loss(x, g, v); }, b);
    EXPECT_TRUE(all_close(dinp, plus(num_dinp, dinp0), 1e-4, 1e-4)) << "C=" << s.C;
    EXPECT_TRUE(all_close(dweight, plus(num_dweight, dweight0), 1e-5, 1e-5)) << "C=" << s.C;
    EXPECT_TRUE(all_close(dbias, plus(num_dbias, dbias0), 1e-5, 1e-5)) << "C=" << s.C;
  }
}

TEST(LayerNorm, SameBitsForAnyThreadCount) {
  Rng rng(13);
  const Shape s{4, 64, 771};
  const auto inp = random_floats(rng, s.B * s.T * s.C);
  const auto weight = random_floats(rng, s.C);
  const auto bias = random_floats(rng, s.C);
  const auto dout = random_floats(rng, inp.size());
  expect_same_bits_for_any_thread_count([&] {
    std::vector<float> out(inp.size()), mean(s.B * s.T), rstd(s.B * s.T);
    std::vector<float> dinp(inp.size()), dweight(s.C), dbias(s.C);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                      s.B, s.T, s.C);
    layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                       weight.data(), mean.data(), rstd.data(), s.B, s.T, s.C);
    for (const auto* v : {&mean, &rstd, &dinp, &dweight, &dbias}) {
      out.insert(out.end(), v->begin(), v->end());
    }
    return out;
  });
}

TEST(LayerNorm, RejectsBadArguments) {
  std::vector<float> f(64);
  float* p = f.data();
  const char* fwd = "layernorm_forward";
  expect_invalid([&] { layernorm_forward(nullptr, p, p, p, p, p, 1, 2, 3); }, {fwd, "'out'"});
  expect_invalid([&] { layernorm_forward(p, nullptr, p, p, p, p, 1, 2, 3); }, {fwd, "'mean'"});
  expect_invalid([&] { layernorm_forward(p, p, nullptr, p, p, p, 1, 2, 3); }, {fwd, "'rstd'"});
  expect_invalid([&] { layernorm_forward(p, p, p, nullptr, p, p, 1, 2, 3); }, {fwd, "'inp'"});
  expect_invalid([&] { layernorm_forward(p, p, p, p, nullptr, p, 1, 2, 3); }, {fwd, "'weight'"});
  expect_invalid([&] { layernorm_forward(p, p, p, p, p, nullptr, 1, 2, 3); }, {fwd, "'bias'"});
  expect_invalid([&] { layernorm_forward(p, p, p, p, p, p, 1, 2, 0); }, {fwd, "C=0"});
  const char* bwd = "layernorm_backward";
  expect_invalid([&] { layernorm_backward(nullptr, p, p, p, p, p, p, p, 1, 2, 3); },
                 {bwd, "'dinp'"});
  expect_invalid([&] { layernorm_backward(p, nullptr, p, p, p, p, p, p, 1, 2, 3); },
                 {bwd, "'dweight'"});
  expect_invalid([&] { layernorm_backward(p, p, nullptr, p, p, p, p, p, 1, 2, 3); },
                 {bwd, "'dbias'"});
  expect_invalid([&] { layernorm_backward(p, p, p, nullptr, p, p, p, p, 1, 2, 3); },
                 {bwd, "'dout'"});
  expect_invalid([&] { layernorm_backward(p, p, p, p, nullptr, p, p, p, 1, 2, 3); },
                 {bwd, "'inp'"});
  expect_invalid([&] { layernorm_backward(p, p, p, p, p, nullptr, p, p, 1, 2, 3); },
                 {bwd, "'weight'"});
  expect_invalid([&] { layernorm_backward(p, p, p, p, p, p, nullptr, p, 1, 2, 3); },
                 {bwd, "'mean'"});
  expect_invalid([&] { layernorm_backward(p, p, p, p, p, p, p, nullptr, 1, 2, 3); },
                 {bwd, "'rstd'"});
  expect_invalid([&] { layernorm_backward(p, p, p, p, p, p, p, p, 0, 2, 3); }, {bwd, "B=0"});
}

}  // namespace
}  // namespace tessel::kernels::cpu
