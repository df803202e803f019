// The registry of CUDA op test cases: each case names an op of kernels/cuda, its shape and
// dtypes, and a run() that draws fresh random inputs, runs the op and its CPU twin
// (kernels/cpu) on the same values (bf16 inputs are rounded before the CPU twin sees them), and
// returns one Comparison per output with the op's stated tolerance. op_registry_test.cpp turns
// every case into a test (skipped, with the reason, where no GPU is usable).
//
// Error measure: the relative L2 error ||gpu - cpu|| / ||cpu|| over the whole output; any NaN
// or infinity fails. Outputs that an op overwrites are poisoned with NaN before it runs, so an
// element it fails to write fails the case; gradients that an op accumulates (+=) start from
// random values of the gradient's own scale, so the += is checked too.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/cuda/context.h"
#include "tests/kernels/kernel_test_support.h"

namespace tessel::kernels::cuda::testing {

using cpu::testing::Rng;

// Stated tolerances (relative L2 error).
// bf16 outputs: one rounding is 2^-9 relative at most, a few hundredths of a percent in L2.
inline constexpr double kBf16Tolerance = 1e-2;
// fp32 outputs of fp32 arithmetic (optimizer, reductions, statistics): order of summation only.
inline constexpr double kFp32Tolerance = 1e-5;
// fp32 outputs of tensor-core products of bf16 operands (dweight, the attention lse): the
// products are exact, the accumulation order and the tensor cores' internal rounding are not.
inline constexpr double kTensorCoreFp32Tolerance = 1e-4;
// Attention backward: p and ds are rounded to bf16 before their products, as FlashAttention does.
inline constexpr double kAttentionBackwardTolerance = 2e-2;

struct Comparison {
  std::string output;  // e.g. "dweight"
  double error;        // relative L2 error, +inf when the GPU output has a NaN or an infinity
  double tolerance;
};

struct OpCase {
  std::string op;                        // the kernels/cuda function, e.g. "matmul_backward"
  std::map<std::string, int64_t> shape;  // e.g. {B: 2, T: 37, C: 96, OC: 200}
  std::string variant;                   // e.g. "bias", "in_place", "misaligned"; may be empty
  std::string dtypes;                    // e.g. "bf16 dout, inp, weight, dinp; fp32 dweight, dbias"
  std::function<std::vector<Comparison>(Rng&, Context&)> run;

  // A GoogleTest-safe name: op, shape and variant, e.g. "matmul_backward_B2_C96_OC200_T37_bias".
  std::string name() const;
};

inline std::string OpCase::name() const {
  std::string name = op;
  for (const auto& [dim, value] : shape) name += "_" + dim + std::to_string(value);
  if (!variant.empty()) name += "_" + variant;
  return name;
}

// How GoogleTest (and so ctest's test names) shows a case.
inline void PrintTo(const OpCase& op_case, std::ostream* out) { *out << op_case.name(); }

namespace detail {
inline std::vector<OpCase>& registered_cases() {
  static std::vector<OpCase> cases;
  return cases;
}
}  // namespace detail

// All registered cases, in registration order (files register in static initialisation; read
// this only from main() on, as GoogleTest's parameter generators do).
inline const std::vector<OpCase>& op_registry() { return detail::registered_cases(); }

// Adds cases; returns true (for `const bool registered = register_op_cases({...})`).
inline bool register_op_cases(std::vector<OpCase> cases) {
  for (auto& c : cases) detail::registered_cases().push_back(std::move(c));
  return true;
}

// ||actual - expected|| / ||expected|| (0 when both are zero); +inf when either has a NaN or an
// infinity, or the sizes differ.
template <class T>
double relative_error(const std::vector<T>& actual, const std::vector<T>& expected) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (actual.size() != expected.size()) return kInf;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (!std::isfinite(a) || !std::isfinite(e)) return kInf;
    diff += (a - e) * (a - e);
    norm += e * e;
  }
  if (norm == 0) return diff == 0 ? 0 : kInf;
  return std::sqrt(diff / norm);
}

}  // namespace tessel::kernels::cuda::testing
