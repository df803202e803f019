#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/launch.cuh"

namespace tessel::kernels::cuda {
namespace {

using namespace detail;
namespace checks = cpu::detail;

constexpr int kThreads = 256;

// GPT-2's tanh GELU and its derivative in fp32:
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// With e = exp(-2|u|) (in (0, 1], never overflows), tanh|u| = (1 - e) / (1 + e): one exp2 and
// one division, accurate to about 1e-7 absolute, where memory is the bottleneck anyway.
constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float tanh_fast(float u) {
  const float e = exp2f(-2.0f * 1.4426950408889634f * fabsf(u));
  const float t = (1.0f - e) / (1.0f + e);
  return copysignf(t, u);
}

__device__ __forceinline__ float gelu(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanh_fast(u));
}

// d gelu / dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx
__device__ __forceinline__ float gelu_derivative(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = tanh_fast(u);
  const float du = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

__global__ void gelu_forward_kernel(bf16* out, const bf16* inp, int64_t N, bool vector) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= N) return;
  const int n = int(min(int64_t(8), N - i));
  float x[8];
  load8(inp + i, n, vector, x);
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] = gelu(x[j]);
  store8(out + i, n, vector, x);
}

__global__ void gelu_backward_kernel(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N,
                                     bool vector) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= N) return;
  const int n = int(min(int64_t(8), N - i));
  float x[8], d[8], acc[8];
  load8(inp + i, n, vector, x);
  load8(dout + i, n, vector, d);
  load8(dinp + i, n, vector, acc);
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j] += gelu_derivative(x[j]) * d[j];
  store8(dinp + i, n, vector, acc);
}

unsigned blocks_for(int64_t N) { return unsigned(ceil_div(N, 8 * kThreads)); }

}  // namespace

void gelu_forward(bf16* out, const bf16* inp, int64_t N, Context& ctx) {
  checks::require_pointer(out, "gelu_forward", "out");
  checks::require_pointer(inp, "gelu_forward", "inp");
  checks::require_positive(N, "gelu_forward", "N");
  const bool vector = aligned16(out) && aligned16(inp);
  TESSEL_LAUNCH(gelu_forward_kernel, blocks_for(N), kThreads, 0, ctx.stream())(out, inp, N, vector);
  TESSEL_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N, Context& ctx) {
  checks::require_pointer(dinp, "gelu_backward", "dinp");
  checks::require_pointer(inp, "gelu_backward", "inp");
  checks::require_pointer(dout, "gelu_backward", "dout");
  checks::require_positive(N, "gelu_backward", "N");
  const bool vector = aligned16(dinp) && aligned16(inp) && aligned16(dout);
  TESSEL_LAUNCH(gelu_backward_kernel, blocks_for(N), kThreads, 0, ctx.stream())
  (dinp, inp, dout, N, vector);
  TESSEL_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

}  // namespace tessel::kernels::cuda
