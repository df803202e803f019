// Shared machinery of the CPU kernel tests.
//
// How the kernels are checked (every op's test file follows it):
// - forward: the float kernel against a naive double-precision reference written in the test
//   (plain loops), on fresh random inputs from a fixed-seed generator, over several shapes
//   including odd ones (B=1, T=1, sizes that are multiples of nothing);
// - backward: the float kernel's gradient of L = sum_i out_i w_i (w random, passed as dout)
//   against central differences of the double reference (step 1e-4: truncation ~1e-8, far
//   below the float kernel's own error), so each backward is checked against the true gradient;
//   gradients are accumulated into non-zero buffers to check the += convention too;
// - determinism: outputs with 1, 2 and 3 threads are bit-identical;
// - bad arguments: every null pointer and bad shape throws std::invalid_argument naming the op
//   and the argument.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu::testing {

// SplitMix64: the same numbers on every platform (std distributions are not portable).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() >> 40) * 0x1.0p-24f; }
  int below(int n) { return int((next() >> 33) % uint64_t(n)); }

 private:
  uint64_t state_;
};

inline std::vector<float> random_floats(Rng& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

inline std::vector<int> random_ints(Rng& rng, int64_t n, int below) {
  std::vector<int> v(n);
  for (auto& x : v) x = rng.below(below);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// |actual - expected| <= atol + rtol |expected| everywhere; names the first few misses.
inline ::testing::AssertionResult all_close(const std::vector<float>& actual,
                                            const std::vector<double>& expected, double atol,
                                            double rtol) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected size " << expected.size();
  }
  std::ostringstream misses;
  int count = 0;
  double worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(double(actual[i]) - expected[i]);
    const double bound = atol + rtol * std::fabs(expected[i]);
    if (!(error <= bound)) {
      if (count < 5) misses << "\n  [" << i << "] " << actual[i] << " vs " << expected[i];
      ++count;
    }
    if (error > worst) worst = error;
  }
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << count << " of " << actual.size() << " elements outside atol=" << atol
         << " rtol=" << rtol << " (worst error " << worst << "):" << misses.str();
}

// Central differences of f at x, step h.
inline std::vector<double> numeric_gradient(
    const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
    double h = 1e-4) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

inline double weighted_sum(const std::vector<double>& out, const std::vector<float>& w) {
  double sum = 0;
  for (size_t i = 0; i < out.size(); ++i) sum += out[i] * w[i];
  return sum;
}

// expected[i] + start[i]: the gradient a += kernel must leave in a buffer that held `start`.
inline std::vector<double> plus(const std::vector<double>& expected,
                                const std::vector<float>& start) {
  std::vector<double> sum(expected);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += start[i];
  return sum;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Sets the kernels' thread count for one scope.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : saved_(num_threads()) { set_num_threads(threads); }
  ~ThreadCount() { set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

// run() with 1, 2 and 3 threads: the outputs must be bit-identical.
inline void expect_same_bits_for_any_thread_count(const std::function<std::vector<float>()>& run) {
  std::vector<float> one;
  {
    ThreadCount threads(1);
    one = run();
  }
  for (int n : {2, 3}) {
    ThreadCount threads(n);
    EXPECT_TRUE(same_bits(run(), one)) << n << " threads differ from 1 thread";
  }
}

// call() must throw std::invalid_argument whose message contains every fragment.
inline void expect_invalid(const std::function<void()>& call,
                           std::initializer_list<std::string> fragments) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one mentioning " << *fragments.begin();
  } catch (const std::invalid_argument& e) {
    for (const auto& fragment : fragments) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "'" << e.what() << "' lacks '" << fragment << "'";
    }
  }
}

}  // namespace tessel::kernels::cpu::testing
