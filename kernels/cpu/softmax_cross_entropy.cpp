#include "kernels/cpu/softmax_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu {
namespace {

using simd::f32x4;

float row_max(const float* x, int64_t n) {
  int64_t i = 0;
  float max_value = x[0];
  if (n >= 4) {
    f32x4 acc = simd::load4(x);
    for (i = 4; i + 4 <= n; i += 4) acc = simd::max4(acc, simd::load4(x + i));
    max_value = simd::max_lanes(acc);
  }
  for (; i < n; ++i) max_value = x[i] > max_value ? x[i] : max_value;
  return max_value;
}

// sum_i exp(x[i] - shift); when e is given, also e[i] = exp(x[i] - shift) (e may be x).
float sum_exp(const float* x, float* e, float shift, int64_t n) {
  const f32x4 s = simd::splat4(shift);
  f32x4 acc{};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const f32x4 v = simd::exp4(simd::load4(x + i) - s);
    if (e != nullptr) simd::store4(e + i, v);
    acc += v;
  }
  float sum = simd::sum_lanes(acc);
  if (const int tail = int(n - i); tail > 0) {
    const f32x4 v = simd::exp4(simd::load_n(x + i, tail) - s);
    if (e != nullptr) simd::store_n(e + i, v, tail);
    for (int j = 0; j < tail; ++j) sum += v[j];
  }
  return sum;
}

void check_targets(const char* op, const int* targets, int64_t n, int V, IgnoreTarget ignore) {
  for (int64_t i = 0; i < n; ++i) {
    const int target = targets[i];
    if (target >= 0 && target < V) continue;
    if (target == -1 && ignore == IgnoreTarget::kMinusOne) continue;
    detail::throw_invalid(op, "targets[" + std::to_string(i) + "]=" + std::to_string(target) +
                                  " is outside [0, V=" + std::to_string(V) + ")" +
                                  (ignore == IgnoreTarget::kMinusOne ? " and is not -1" : ""));
  }
}

}  // namespace

void softmax_cross_entropy(float* losses, float* dlogits, const float* logits, const int* targets,
                           float dloss, int B, int T, int V, IgnoreTarget ignore) {
  constexpr const char* kOp = "softmax_cross_entropy";
  detail::require_pointer(losses, kOp, "losses");
  detail::require_pointer(logits, kOp, "logits");
  detail::require_pointer(targets, kOp, "targets");
  detail::require_positive(B, kOp, "B");
  detail::require_positive(T, kOp, "T");
  detail::require_positive(V, kOp, "V");
  check_targets(kOp, targets, int64_t(B) * T, V, ignore);
  parallel_for(int64_t(B) * T, rows_per_chunk(V), [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
      const float* x = logits + bt * V;
      float* dx = dlogits == nullptr ? nullptr : dlogits + bt * V;
      const int target = targets[bt];
      if (target == -1) {
        losses[bt] = 0.0f;
        if (dx != nullptr) std::fill(dx, dx + V, 0.0f);
        continue;
      }
      const float x_target = x[target];  // read before dx (maybe x) is overwritten
      const float shift = row_max(x, V);
      const float sum = sum_exp(x, dx, shift, V);
      losses[bt] = std::log(sum) + shift - x_target;
      if (dx == nullptr) continue;
      const float scale = dloss / sum;
      simd::scale(dx, scale, V);
      dx[target] -= dloss;
    }
  });
}

}  // namespace tessel::kernels::cpu
