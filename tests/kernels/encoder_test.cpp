#include "kernels/cpu/encoder.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cpu {
namespace {

using namespace testing;

struct Shape {
  int B, T, C, V;
};
const Shape kShapes[] = {{1, 1, 1, 1}, {1, 7, 13, 5}, {3, 17, 33, 11}, {2, 64, 130, 257}};

std::vector<double> reference(const std::vector<int>& inp, const std::vector<double>& wte,
                              const std::vector<double>& wpe, const Shape& s) {
  std::vector<double> out(size_t(s.B) * s.T * s.C);
  for (int b = 0; b < s.B; ++b) {
    for (int t = 0; t < s.T; ++t) {
      for (int c = 0; c < s.C; ++c) {
        out[(b * s.T + t) * s.C + c] = wte[inp[b * s.T + t] * s.C + c] + wpe[t * s.C + c];
      }
    }
  }
  return out;
}

TEST(Encoder, ForwardMatchesReference) {
  Rng rng(1);
  for (const Shape& s : kShapes) {
    const auto inp = random_ints(rng, s.B * s.T, s.V);
    const auto wte = random_floats(rng, s.V * s.C);
    const auto wpe = random_floats(rng, (s.T + 3) * s.C);  // maxT > T: extra rows unread
    std::vector<float> out(s.B * s.T * s.C);
    encoder_forward(out.data(), inp.data(), wte.data(), wpe.data(), s.B, s.T, s.C, s.V);
    // One float addition per element: exact up to its rounding.
    EXPECT_TRUE(all_close(out, reference(inp, to_double(wte), to_double(wpe), s), 0, 6e-8))
        << "B=" << s.B << " T=" << s.T << " C=" << s.C;
  }
}

TEST(Encoder, BackwardMatchesFiniteDifferences) {
  Rng rng(2);
  for (const Shape& s : {Shape{1, 1, 1, 1}, Shape{2, 5, 3, 4}, Shape{3, 4, 6, 2}}) {
    const auto inp = random_ints(rng, s.B * s.T, s.V);  // V small: tokens repeat
    const auto wte = random_floats(rng, s.V * s.C);
    const auto wpe = random_floats(rng, s.T * s.C);
    const auto w = random_floats(rng, s.B * s.T * s.C);
    auto dwte = random_floats(rng, wte.size());
    auto dwpe = random_floats(rng, wpe.size());
    const auto dwte0 = dwte, dwpe0 = dwpe;
    encoder_backward(dwte.data(), dwpe.data(), w.data(), inp.data(), s.B, s.T, s.C, s.V);
    const auto num_dwte = numeric_gradient(
        [&](const std::vector<double>& x) {
          return weighted_sum(reference(inp, x, to_double(wpe), s), w);
        },
        to_double(wte));
    const auto num_dwpe = numeric_gradient(
        [&](const std::vector<double>& x) {
          return weighted_sum(reference(inp, to_double(wte), x, s), w);
        },
        to_double(wpe));
    EXPECT_TRUE(all_close(dwte, plus(num_dwte, dwte0), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(dwpe, plus(num_dwpe, dwpe0), 1e-5, 1e-5));
  }
}

TEST(Encoder, SameBitsForAnyThreadCount) {
  Rng rng(3);
  const Shape s{4, 64, 768, 50};  // few tokens: many repeats collide in dwte
  const auto inp = random_ints(rng, s.B * s.T, s.V);
  const auto wte = random_floats(rng, s.V * s.C);
  const auto wpe = random_floats(rng, s.T * s.C);
  const auto dout = random_floats(rng, s.B * s.T * s.C);
  expect_same_bits_for_any_thread_count([&] {
    std::vector<float> out(s.B * s.T * s.C), dwte(wte.size()), dwpe(wpe.size());
    encoder_forward(out.data(), inp.data(), wte.data(), wpe.data(), s.B, s.T, s.C, s.V);
    encoder_backward(dwte.data(), dwpe.data(), dout.data(), inp.data(), s.B, s.T, s.C, s.V);
    out.insert(out.end(), dwte.begin(), dwte.end());
    out.insert(out.end(), dwpe.begin(), dwpe.end());
    return out;
  });
}

TEST(Encoder, RejectsBadArguments) {
  std::vector<float> f(64);
  std::vector<int> tokens = {0, 1, 2, 3};
  float* p = f.data();
  const int* ids = tokens.data();
  expect_invalid([&] { encoder_forward(nullptr, ids, p, p, 1, 4, 2, 4); },
                 {"encoder_forward", "'out'"});
  expect_invalid([&] { encoder_forward(p, nullptr, p, p, 1, 4, 2, 4); },
                 {"encoder_forward", "'inp'"});
  expect_invalid([&] { encoder_forward(p, ids, nullptr, p, 1, 4, 2, 4); },
                 {"encoder_forward", "'wte'"});
  expect_invalid([&] { encoder_forward(p, ids, p, nullptr, 1, 4, 2, 4); },
                 {"encoder_forward", "'wpe'"});
  expect_invalid([&] { encoder_forward(p, ids, p, p, 0, 4, 2, 4); }, {"encoder_forward", "B=0"});
  expect_invalid([&] { encoder_forward(p, ids, p, p, 1, 4, -2, 4); }, {"encoder_forward", "C=-2"});
  expect_invalid([&] { encoder_forward(p, ids, p, p, 1, 4, 2, 3); },
                 {"encoder_forward", "inp[3]=3", "V=3"});
  tokens[1] = -1;
  expect_invalid([&] { encoder_backward(p, p, p, ids, 1, 4, 2, 4); },
                 {"encoder_backward", "inp[1]=-1"});
  expect_invalid([&] { encoder_backward(nullptr, p, p, ids, 1, 4, 2, 4); },
                 {"encoder_backward", "'dwte'"});
  expect_invalid([&] { encoder_backward(p, nullptr, p, ids, 1, 4, 2, 4); },
                 {"encoder_backward", "'dwpe'"});
  expect_invalid([&] { encoder_backward(p, p, nullptr, ids, 1, 4, 2, 4); },
                 {"encoder_backward", "'dout'"});
  expect_invalid([&] { encoder_backward(p, p, p, nullptr, 1, 4, 2, 4); },
                 {"encoder_backward", "'inp'"});
  expect_invalid([&] { encoder_backward(p, p, p, ids, 1, 0, 2, 4); }, {"encoder_backward", "T=0"});
}

}  // namespace
}  // namespace tessel::kernels::cpu
