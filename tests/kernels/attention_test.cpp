#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using namespace testing;

struct Shape {
  int B, T, C, NH;
  size_t inp_size() const { return size_t(B) * T * 3 * C; }
  size_t out_size() const { return size_t(B) * T * C; }
  size_t att_size() const { return size_t(B) * NH * T * T; }
};

struct Reference {
  std::vector<double> out, att;
};

Reference reference(const std::vector<double>& inp, const Shape& s) {
  const int HS = s.C / s.NH;
  Reference r{std::vector<double>(s.out_size()), std::vector<double>(s.att_size())};
  auto at = [&](int b, int t, int part, int h, int i) {
    return inp[((size_t(b) * s.T + t) * 3 + part) * s.C + h * HS + i];
  };
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.NH; ++h) {
      for (int t = 0; t < s.T; ++t) {
        std::vector<double> score(t + 1);
        double max_score = -1e300;
        for (int t2 = 0; t2 <= t; ++t2) {
          double dot = 0;
          for (int i = 0; i < HS; ++i) dot += at(b, t, 0, h, i) * at(b, t2, 1, h, i);
          score[t2] = dot / std::sqrt(double(HS));
          max_score = std::max(max_score, score[t2]);
        }
        double sum = 0;
        for (double& x : score) sum += (x = std::exp(x - max_score));
        for (int t2 = 0; t2 <= t; ++t2) {
          const double p = score[t2] / sum;
          r.att[((size_t(b) * s.NH + h) * s.T + t) * s.T + t2] = p;
          for (int i = 0; i < HS; ++i) {
            r.out[(size_t(b) * s.T + t) * s.C + h * HS + i] += p * at(b, t2, 2, h, i);
          }
        }
      }
    }
  }
  return r;
}

TEST(Attention, ForwardMatchesReference) {
  Rng rng(41);
  // One token; heads of size 2, 1 (NH = C), 12 and 5 (odd); GPT-2's 12 heads of 64.
  for (const Shape& s : {Shape{1, 1, 1, 1}, Shape{1, 5, 6, 3}, Shape{2, 7, 4, 4},
                         Shape{3, 17, 24, 2}, Shape{1, 9, 15, 3}, Shape{2, 64, 768, 12}}) {
    const auto inp = random_floats(rng, s.inp_size(), -2.0f, 2.0f);
    std::vector<float> out(s.out_size()), att(s.att_size(), -1.0f);
    attention_forward(out.data(), att.data(), inp.data(), s.B, s.T, s.C, s.NH);
    const Reference r = reference(to_double(inp), s);
    EXPECT_TRUE(all_close(out, r.out, 1e-6, 1e-5)) << "T=" << s.T << " C=" << s.C;
    // Also zero above the diagonal (the buffer started at -1).
    EXPECT_TRUE(all_close(att, r.att, 1e-7, 1e-5)) << "T=" << s.T << " C=" << s.C;
  }
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  Rng rng(42);
  for (const Shape& s :
       {Shape{1, 1, 2, 1}, Shape{2, 5, 6, 3}, Shape{1, 4, 4, 4}, Shape{1, 3, 10, 2}}) {
    const auto inp = random_floats(rng, s.inp_size(), -2.0f, 2.0f);
    const auto w = random_floats(rng, s.out_size());
    std::vector<float> out(s.out_size()), att(s.att_size());
    attention_forward(out.data(), att.data(), inp.data(), s.B, s.T, s.C, s.NH);
    auto dinp = random_floats(rng, inp.size());
    const auto dinp0 = dinp;
    attention_backward(dinp.data(), w.data(), inp.data(), att.data(), s.B, s.T, s.C, s.NH);
    const auto numeric = numeric_gradient(
        [&](const std::vector<double>& x) { return weighted_sum(reference(x, s).out, w); },
        to_double(inp));
    EXPECT_TRUE(all_close(dinp, plus(numeric, dinp0), 1e-5, 1e-4))
        << "T=" << s.T << " C=" << s.C << " NH=" << s.NH;
  }
}

TEST(Attention, SameBitsForAnyThreadCount) {
  Rng rng(43);
  const Shape s{4, 64, 768, 12};
  const auto inp = random_floats(rng, s.inp_size());
  const auto dout = random_floats(rng, s.out_size());
  expect_same_bits_for_any_thread_count([&] {
    std::vector<float> out(s.out_size()), att(s.att_size()), dinp(s.inp_size());
    attention_forward(out.data(), att.data(), inp.data(), s.B, s.T, s.C, s.NH);
    attention_backward(dinp.data(), dout.data(), inp.data(), att.data(), s.B, s.T, s.C, s.NH);
    out.insert(out.end(), att.begin(), att.end());
    out.insert(out.end(), dinp.begin(), dinp.end());
    return out;
  });
}

TEST(Attention, RejectsBadArguments) {
  std::vector<float> f(512);
  float* p = f.data();
  const char* fwd = "attention_forward";
  expect_invalid([&] { attention_forward(nullptr, p, p, 1, 2, 4, 2); }, {fwd, "'out'"});
  expect_invalid([&] { attention_forward(p, nullptr, p, 1, 2, 4, 2); }, {fwd, "'att'"});
  expect_invalid([&] { attention_forward(p, p, nullptr, 1, 2, 4, 2); }, {fwd, "'inp'"});
  expect_invalid([&] { attention_forward(p, p, p, 1, 2, 10, 3); },
                 {fwd, "C=10 is not a multiple of NH=3"});
  expect_invalid([&] { attention_forward(p, p, p, 1, 2, 4, 0); }, {fwd, "NH=0"});
  const char* bwd = "attention_backward";
  expect_invalid([&] { attention_backward(nullptr, p, p, p, 1, 2, 4, 2); }, {bwd, "'dinp'"});
  expect_invalid([&] { attention_backward(p, nullptr, p, p, 1, 2, 4, 2); }, {bwd, "'dout'"});
  expect_invalid([&] { attention_backward(p, p, nullptr, p, 1, 2, 4, 2); }, {bwd, "'inp'"});
  expect_invalid([&] { attention_backward(p, p, p, nullptr, 1, 2, 4, 2); }, {bwd, "'att'"});
  expect_invalid([&] { attention_backward(p, p, p, p, 1, 2, 6, 4); },
                 {bwd, "C=6 is not a multiple of NH=4"});
  expect_invalid([&] { attention_backward(p, p, p, p, 0, 2, 4, 2); }, {bwd, "B=0"});
}

}  // namespace
}  // namespace tessel::kernels::cpu
