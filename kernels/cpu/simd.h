// Four-float vectors for the hot loops of the CPU kernels (GCC/Clang vector extensions: SSE on
// baseline x86-64, NEON on arm64, no -march; the one intrinsic is SSE's sqrtps, with a portable
// fallback).
//
// Why not plain loops: the build uses -O2, whose vectoriser (GCC's "very cheap" cost model)
// leaves alone every loop that needs a scalar epilogue or an alias check, i.e. nearly all of
// ours, and it never vectorises libm's expf/tanhf. Writing the loops over f32x4 makes them
// vectorise at -O2 on any x86-64.
//
// Reductions keep four (or eight) partial sums combined in a fixed order: a result depends on
// the inputs and the length only.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace tessel::kernels::cpu::simd {

using f32x4 = float __attribute__((vector_size(16)));
using i32x4 = std::int32_t __attribute__((vector_size(16)));

inline f32x4 load4(const float* p) {
  f32x4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, f32x4 v) { std::memcpy(p, &v, sizeof v); }
// The first n (< 4) lanes, for loop tails that must get the same arithmetic as full vectors.
inline f32x4 load_n(const float* p, int n) {
  f32x4 v{};
  for (int j = 0; j < n; ++j) v[j] = p[j];
  return v;
}
inline void store_n(float* p, f32x4 v, int n) {
  for (int j = 0; j < n; ++j) p[j] = v[j];
}
inline f32x4 splat4(float x) { return f32x4{x, x, x, x}; }
inline f32x4 max4(f32x4 a, f32x4 b) { return a > b ? a : b; }
inline float sum_lanes(f32x4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }
inline float max_lanes(f32x4 v) {
  const float a = v[0] > v[1] ? v[0] : v[1];
  const float b = v[2] > v[3] ? v[2] : v[3];
  return a > b ? a : b;
}

// sum_i a[i] * b[i], eight partial sums.
inline float dot(const float* a, const float* b, int64_t n) {
  f32x4 acc0{}, acc1{};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 += load4(a + i) * load4(b + i);
    acc1 += load4(a + i + 4) * load4(b + i + 4);
  }
  if (i + 4 <= n) {
    acc0 += load4(a + i) * load4(b + i);
    i += 4;
  }
  float sum = sum_lanes(acc0 + acc1);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y[i] += alpha * x[i].
inline void axpy(float* y, float alpha, const float* x, int64_t n) {
  const f32x4 a = splat4(alpha);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) store4(y + i, load4(y + i) + a * load4(x + i));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

// Correctly rounded square roots (the same values as std::sqrt on each lane). Baseline x86-64
// has SSE's sqrtps; elsewhere lane by lane (-O2 keeps std::sqrt scalar because of errno).
inline f32x4 sqrt4(f32x4 x) {
#if defined(__SSE__)
  return _mm_sqrt_ps(x);
#else
  for (int j = 0; j < 4; ++j) x[j] = std::sqrt(x[j]);
  return x;
#endif
}

// x[i] *= alpha.
inline void scale(float* x, float alpha, int64_t n) {
  const f32x4 a = splat4(alpha);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) store4(x + i, load4(x + i) * a);
  for (; i < n; ++i) x[i] *= alpha;
}

// e^x to within 2 ulp for x in [-87, 88]; x is clamped to that range first (so e^-inf gives
// 1.6e-38, not 0), NaN stays NaN. Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, then the
// degree-8 Taylor polynomial of e^r (truncation error below 1e-8 relative) scaled by 2^k.
inline f32x4 exp4(f32x4 x) {
  const f32x4 lo = splat4(-87.0f);
  const f32x4 hi = splat4(88.0f);
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const f32x4 round_magic = splat4(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const f32x4 k = (x * 1.44269504088896341f + round_magic) - round_magic;
  const f32x4 r = (x - k * 0.693145751953125f) - k * 1.428606765330187e-06f;  // ln2 = hi + lo
  f32x4 p = splat4(1.0f / 40320);
  p = p * r + 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const i32x4 two_to_k = (__builtin_convertvector(k, i32x4) + 127) << 23;
  return p * std::bit_cast<f32x4>(two_to_k);
}

}  // namespace tessel::kernels::cpu::simd
