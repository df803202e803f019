#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu {
namespace {

using simd::f32x4;
using simd::load4;
using simd::splat4;
using simd::store4;
using simd::sum_lanes;

void check_shape(const char* op, int B, int T, int C) {
  detail::require_positive(B, op, "B");
  detail::require_positive(T, op, "T");
  detail::require_positive(C, op, "C");
}

float row_sum(const float* x, int C) {
  f32x4 acc{};
  int c = 0;
  for (; c + 4 <= C; c += 4) acc += load4(x + c);
  float sum = sum_lanes(acc);
  for (; c < C; ++c) sum += x[c];
  return sum;
}

float row_squared_deviation(const float* x, float mean, int C) {
  const f32x4 m = splat4(mean);
  f32x4 acc{};
  int c = 0;
  for (; c + 4 <= C; c += 4) {
    const f32x4 d = load4(x + c) - m;
    acc += d * d;
  }
  float sum = sum_lanes(acc);
  for (; c < C; ++c) sum += (x[c] - mean) * (x[c] - mean);
  return sum;
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int B, int T, int C) {
  constexpr const char* kOp = "layernorm_forward";
  detail::require_pointer(out, kOp, "out");
  detail::require_pointer(mean, kOp, "mean");
  detail::require_pointer(rstd, kOp, "rstd");
  detail::require_pointer(inp, kOp, "inp");
  detail::require_pointer(weight, kOp, "weight");
  detail::require_pointer(bias, kOp, "bias");
  check_shape(kOp, B, T, C);
  parallel_for(int64_t(B) * T, rows_per_chunk(C), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* x = inp + r * C;
      float* y = out + r * C;
      const float m = row_sum(x, C) / C;
      const float s = 1.0f / std::sqrt(row_squared_deviation(x, m, C) / C + kLayerNormEps);
      const f32x4 m4 = splat4(m);
      const f32x4 s4 = splat4(s);
      int c = 0;
      for (; c + 4 <= C; c += 4) {
        store4(y + c, (load4(x + c) - m4) * s4 * load4(weight + c) + load4(bias + c));
      }
      for (; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
      mean[r] = m;
      rstd[r] = s;
    }
  });
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int B, int T, int C) {
  constexpr const char* kOp = "layernorm_backward";
  detail::require_pointer(dinp, kOp, "dinp");
  detail::require_pointer(dweight, kOp, "dweight");
  detail::require_pointer(dbias, kOp, "dbias");
  detail::require_pointer(dout, kOp, "dout");
  detail::require_pointer(inp, kOp, "inp");
  detail::require_pointer(weight, kOp, "weight");
  detail::require_pointer(mean, kOp, "mean");
  detail::require_pointer(rstd, kOp, "rstd");
  check_shape(kOp, B, T, C);
  const int64_t rows = int64_t(B) * T;
  // dinp, row by row: with n = (x - mean) rstd and g = weight * dout,
  // dinp = rstd (g - mean(g) - n mean(g n)).
  parallel_for(rows, rows_per_chunk(C), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* x = inp + r * C;
      const float* dy = dout + r * C;
      float* dx = dinp + r * C;
      const f32x4 m = splat4(mean[r]);
      const f32x4 s = splat4(rstd[r]);
      f32x4 g_sum{};
      f32x4 gn_sum{};
      int c = 0;
      for (; c + 4 <= C; c += 4) {
        const f32x4 g = load4(weight + c) * load4(dy + c);
        g_sum += g;
        gn_sum += g * ((load4(x + c) - m) * s);
      }
      float g_total = sum_lanes(g_sum);
      float gn_total = sum_lanes(gn_sum);
      for (; c < C; ++c) {
        const float g = weight[c] * dy[c];
        g_total += g;
        gn_total += g * ((x[c] - mean[r]) * rstd[r]);
      }
      const f32x4 g_mean = splat4(g_total / C);
      const f32x4 gn_mean = splat4(gn_total / C);
      for (c = 0; c + 4 <= C; c += 4) {
        const f32x4 n = (load4(x + c) - m) * s;
        const f32x4 g = load4(weight + c) * load4(dy + c);
        store4(dx + c, load4(dx + c) + (g - g_mean - n * gn_mean) * s);
      }
      for (; c < C; ++c) {
        const float n = (x[c] - mean[r]) * rstd[r];
        dx[c] += (weight[c] * dy[c] - g_mean[0] - n * gn_mean[0]) * rstd[r];
      }
    }
  });
  // dweight and dbias sum over all rows: each chunk owns a block of columns and walks the rows
  // in order, so the sum order does not depend on the thread count.
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
  parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    const int64_t c0 = begin * kColumnBlock;
    const int64_t c1 = std::min<int64_t>(C, end * kColumnBlock);
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = inp + r * C;
      const float* dy = dout + r * C;
      const f32x4 m = splat4(mean[r]);
      const f32x4 s = splat4(rstd[r]);
      int64_t c = c0;
      for (; c + 4 <= c1; c += 4) {
        const f32x4 g = load4(dy + c);
        store4(dbias + c, load4(dbias + c) + g);
        store4(dweight + c, load4(dweight + c) + (load4(x + c) - m) * s * g);
      }
      for (; c < c1; ++c) {
        dbias[c] += dy[c];
        dweight[c] += (x[c] - mean[r]) * rstd[r] * dy[c];
      }
    }
  });
}

}  // namespace tessel::kernels::cpu
