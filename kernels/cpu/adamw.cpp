#include "kernels/cpu/adamw.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu {

using simd::f32x4;

void adamw_update(float* params, float* m, float* v, const float* grads, int64_t N,
                  const AdamWHyperparameters& hp, int step, float grad_scale) {
  constexpr const char* kOp = "adamw_update";
  detail::require_pointer(params, kOp, "params");
  detail::require_pointer(m, kOp, "m");
  detail::require_pointer(v, kOp, "v");
  detail::require_pointer(grads, kOp, "grads");
  detail::require_positive(N, kOp, "N");
  detail::check_adamw_scalars(kOp, hp, step, grad_scale);
  // m_hat / (sqrt(v_hat) + eps) with m_hat = m / bc1 and sqrt(v_hat) = sqrt(v) / sqrt(bc2).
  const float inv_bc1 = float(1.0 / (1.0 - std::pow(double(hp.beta1), step)));
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(1.0 - std::pow(double(hp.beta2), step)));
  auto update4 = [&](f32x4& p4, f32x4& m4, f32x4& v4, f32x4 grad4) {
    const f32x4 g = grad4 * grad_scale;
    m4 = hp.beta1 * m4 + (1.0f - hp.beta1) * g;
    v4 = hp.beta2 * v4 + (1.0f - hp.beta2) * g * g;
    const f32x4 direction = m4 * inv_bc1 / (simd::sqrt4(v4) * inv_sqrt_bc2 + hp.eps);
    p4 -= hp.learning_rate * (direction + hp.weight_decay * p4);
  };
  parallel_for(N, kChunkElements, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) {
      f32x4 p4 = simd::load4(params + i), m4 = simd::load4(m + i), v4 = simd::load4(v + i);
      update4(p4, m4, v4, simd::load4(grads + i));
      simd::store4(params + i, p4);
      simd::store4(m + i, m4);
      simd::store4(v + i, v4);
    }
    if (const int n = int(end - i); n > 0) {
      f32x4 p4 = simd::load_n(params + i, n), m4 = simd::load_n(m + i, n),
            v4 = simd::load_n(v + i, n);
      update4(p4, m4, v4, simd::load_n(grads + i, n));
      simd::store_n(params + i, p4, n);
      simd::store_n(m + i, m4, n);
      simd::store_n(v + i, v4, n);
    }
  });
}

double sum_of_squares(const float* x, int64_t N) {
  detail::require_pointer(x, "sum_of_squares", "x");
  detail::require_positive(N, "sum_of_squares", "N");
  // Fixed blocks, four interleaved partial sums each, block sums added in block order.
  const int64_t blocks = (N + kChunkElements - 1) / kChunkElements;
  std::vector<double> block_sums(blocks);
  parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t i0 = block * kChunkElements;
      const int64_t i1 = std::min(N, i0 + kChunkElements);
      double acc[4] = {0, 0, 0, 0};
      int64_t i = i0;
      for (; i + 4 <= i1; i += 4) {
        for (int j = 0; j < 4; ++j) acc[j] += double(x[i + j]) * x[i + j];
      }
      for (; i < i1; ++i) acc[0] += double(x[i]) * x[i];
      block_sums[block] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
  });
  double total = 0;
  for (const double s : block_sums) total += s;
  return total;
}

double global_norm(const float* x, int64_t N) { return std::sqrt(sum_of_squares(x, N)); }

float clip_scale(double norm, float max_norm) {
  if (!(std::isfinite(max_norm) && max_norm > 0)) {
    detail::throw_invalid("clip_scale",
                          "max_norm=" + std::to_string(max_norm) + " must be finite and > 0");
  }
  if (!std::isfinite(norm)) return std::numeric_limits<float>::quiet_NaN();
  if (norm < 0) {
    detail::throw_invalid("clip_scale", "norm=" + std::to_string(norm) + " is negative");
  }
  return norm > max_norm ? float(max_norm / norm) : 1.0f;
}

namespace detail {

void check_adamw_scalars(const char* op, const AdamWHyperparameters& hp, int step,
                         float grad_scale) {
  auto fail = [op](const char* name, float value, const char* rule) {
    throw_invalid(op, std::string(name) + "=" + std::to_string(value) + " " + rule);
  };
  if (!(std::isfinite(hp.learning_rate) && hp.learning_rate >= 0)) {
    fail("learning_rate", hp.learning_rate, "must be finite and >= 0");
  }
  if (!(hp.beta1 >= 0 && hp.beta1 < 1)) fail("beta1", hp.beta1, "is outside [0, 1)");
  if (!(hp.beta2 >= 0 && hp.beta2 < 1)) fail("beta2", hp.beta2, "is outside [0, 1)");
  if (!(std::isfinite(hp.eps) && hp.eps > 0)) fail("eps", hp.eps, "must be finite and > 0");
  if (!(std::isfinite(hp.weight_decay) && hp.weight_decay >= 0)) {
    fail("weight_decay", hp.weight_decay, "must be finite and >= 0");
  }
  if (!(std::isfinite(grad_scale) && grad_scale >= 0)) {
    fail("grad_scale", grad_scale, "must be finite and >= 0");
  }
  require_positive(step, op, "step");
}

}  // namespace detail

}  // namespace tessel::kernels::cpu
