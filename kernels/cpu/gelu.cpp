#include "kernels/cpu/gelu.h"

#include "kernels/cpu/argument_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu {
namespace {

using simd::f32x4;
using simd::splat4;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// With u = sqrt(2/pi) (x + 0.044715 x^3), e = exp(2u) and q = 1 / (e + 1):
//   tanh(u) = 1 - 2q,  so gelu(x) = x (1 - q) = x e q,  and sech^2(u) = 4 e q^2.
// The products e q avoid the cancellation of 1 - q. Where |2u| > 80, tanh is +-1 in float and
// sech^2 is taken as 0; clamping 2u there keeps e and q normal (no slow denormals).
struct TanhParts {
  f32x4 eq;   // e q = (1 + tanh(u)) / 2
  f32x4 eqq;  // e q^2 = sech^2(u) / 4
};

f32x4 clamp4(f32x4 v, float bound) {
  const f32x4 lo = splat4(-bound);
  const f32x4 hi = splat4(bound);
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

TanhParts tanh_parts(f32x4 x) {
  const f32x4 two_u = (2.0f * kSqrt2OverPi) * (x + kCubic * x * x * x);
  const auto saturated = (two_u < -80.0f) | (two_u > 80.0f);
  const f32x4 e = simd::exp4(clamp4(two_u, 80.0f));
  const f32x4 q = 1.0f / (e + 1.0f);
  const f32x4 eq = e * q;
  return {eq, saturated ? f32x4{} : eq * q};
}

f32x4 gelu4(f32x4 x) { return x * tanh_parts(x).eq; }

// d gelu / dx = (1 + tanh u) / 2 + x/2 sech^2(u) du/dx,  du/dx = sqrt(2/pi) (1 + 3 0.044715 x^2).
// The second term only lives where |x| < 10 (sech^2 is 0 beyond); x is clamped to +-20 in it so
// that huge |x| gives 0 * finite rather than 0 * inf.
f32x4 gelu_grad4(f32x4 x) {
  const TanhParts p = tanh_parts(x);
  const f32x4 xc = clamp4(x, 20.0f);
  return p.eq + 2.0f * xc * p.eqq * (kSqrt2OverPi * (1.0f + 3.0f * kCubic * xc * xc));
}

}  // namespace

void gelu_forward(float* out, const float* inp, int64_t N) {
  constexpr const char* kOp = "gelu_forward";
  detail::require_pointer(out, kOp, "out");
  detail::require_pointer(inp, kOp, "inp");
  detail::require_positive(N, kOp, "N");
  parallel_for(N, kChunkElements, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) simd::store4(out + i, gelu4(simd::load4(inp + i)));
    if (const int n = int(end - i); n > 0) {
      simd::store_n(out + i, gelu4(simd::load_n(inp + i, n)), n);
    }
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
  constexpr const char* kOp = "gelu_backward";
  detail::require_pointer(dinp, kOp, "dinp");
  detail::require_pointer(inp, kOp, "inp");
  detail::require_pointer(dout, kOp, "dout");
  detail::require_positive(N, kOp, "N");
  parallel_for(N, kChunkElements, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) {
      const f32x4 grad = gelu_grad4(simd::load4(inp + i)) * simd::load4(dout + i);
      simd::store4(dinp + i, simd::load4(dinp + i) + grad);
    }
    if (const int n = int(end - i); n > 0) {
      const f32x4 grad = gelu_grad4(simd::load_n(inp + i, n)) * simd::load_n(dout + i, n);
      simd::store_n(dinp + i, simd::load_n(dinp + i, n) + grad, n);
    }
  });
}

}  // namespace tessel::kernels::cpu
