#include <cmath>
#include <string>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/launch.cuh"

namespace tessel::kernels::cuda {
namespace {

using namespace detail;
namespace checks = cpu::detail;

constexpr int kThreads = 256;
// sum_of_squares: each block of the first pass sums this many elements (8 per thread, 16 times).
constexpr int64_t kSquaresPerBlock = int64_t(kThreads) * 8 * 16;

struct AdamWStep {
  float learning_rate, beta1, beta2, eps, weight_decay;
  float inv_bias_correction1;       // 1 / (1 - beta1^t)
  float inv_sqrt_bias_correction2;  // 1 / sqrt(1 - beta2^t)
  float grad_scale;
};

// 8 elements per thread; the update is the CPU twin's, term for term.
__global__ void adamw_kernel(float* params, float* m, float* v, const float* grads,
                             __nv_bfloat16* params_bf16, int64_t N, AdamWStep s, bool vector,
                             bool vector_bf16) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= N) return;
  const int n = int(min(int64_t(8), N - i));
  float p[8], m8[8], v8[8], g[8];
  load8(params + i, n, vector, p);
  load8(m + i, n, vector, m8);
  load8(v + i, n, vector, v8);
  load8(grads + i, n, vector, g);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float grad = g[j] * s.grad_scale;
    m8[j] = s.beta1 * m8[j] + (1.0f - s.beta1) * grad;
    v8[j] = s.beta2 * v8[j] + (1.0f - s.beta2) * grad * grad;
    const float direction =
        m8[j] * s.inv_bias_correction1 / (sqrtf(v8[j]) * s.inv_sqrt_bias_correction2 + s.eps);
    p[j] -= s.learning_rate * (direction + s.weight_decay * p[j]);
  }
  store8(params + i, n, vector, p);
  store8(m + i, n, vector, m8);
  store8(v + i, n, vector, v8);
  if (params_bf16 != nullptr) store8(params_bf16 + i, n, vector_bf16, p);
}

__device__ __forceinline__ double warp_sum_double(double x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

// The block's sum over its threads, in a fixed order; valid in thread 0.
__device__ __forceinline__ double block_sum_double(double x) {
  __shared__ double warp_sums[32];
  x = warp_sum_double(x);
  if (threadIdx.x % kWarpSize == 0) warp_sums[threadIdx.x / kWarpSize] = x;
  __syncthreads();
  x = threadIdx.x < blockDim.x / kWarpSize ? warp_sums[threadIdx.x] : 0.0;
  return threadIdx.x < kWarpSize ? warp_sum_double(x) : 0.0;
}

// Block b sums x^2 over [b * kSquaresPerBlock, +kSquaresPerBlock) in double into partial[b].
__global__ void squares_partial_kernel(double* partial, const float* x, int64_t N, bool vector) {
  const int64_t begin = int64_t(blockIdx.x) * kSquaresPerBlock;
  double sum = 0.0;
#pragma unroll 4
  for (int k = 0; k < 16; ++k) {
    const int64_t i = begin + (int64_t(k) * kThreads + threadIdx.x) * 8;
    if (i >= N) break;
    const int n = int(min(int64_t(8), N - i));
    float a[8];
    load8(x + i, n, vector, a);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += double(a[j]) * double(a[j]);
  }
  sum = block_sum_double(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// *total = sum of partial[0 .. parts): thread i adds parts i, i + 1024, ... then the block sum.
__global__ void squares_total_kernel(double* total, const double* partial, int64_t parts) {
  double sum = 0.0;
  for (int64_t p = threadIdx.x; p < parts; p += blockDim.x) sum += partial[p];
  sum = block_sum_double(sum);
  if (threadIdx.x == 0) *total = sum;
}

}  // namespace

void adamw_update(float* params, float* m, float* v, const float* grads, int64_t N,
                  const AdamWHyperparameters& hp, int step, float grad_scale, bf16* params_bf16,
                  Context& ctx) {
  constexpr const char* kOp = "adamw_update";
  checks::require_pointer(params, kOp, "params");
  checks::require_pointer(m, kOp, "m");
  checks::require_pointer(v, kOp, "v");
  checks::require_pointer(grads, kOp, "grads");
  checks::require_positive(N, kOp, "N");
  checks::check_adamw_scalars(kOp, hp, step, grad_scale);
  const AdamWStep s{hp.learning_rate,
                    hp.beta1,
                    hp.beta2,
                    hp.eps,
                    hp.weight_decay,
                    float(1.0 / (1.0 - std::pow(double(hp.beta1), step))),
                    float(1.0 / std::sqrt(1.0 - std::pow(double(hp.beta2), step))),
                    grad_scale};
  const bool vector = aligned16(params) && aligned16(m) && aligned16(v) && aligned16(grads);
  const bool vector_bf16 = params_bf16 != nullptr && aligned16(params_bf16);
  TESSEL_LAUNCH(adamw_kernel, unsigned(ceil_div(N, 8 * kThreads)), kThreads, 0, ctx.stream())
  (params, m, v, grads, params_bf16, N, s, vector, vector_bf16);
  TESSEL_CUDA_CHECK_LAUNCH("adamw_kernel");
}

double sum_of_squares(const float* x, int64_t N, Context& ctx) {
  checks::require_pointer(x, "sum_of_squares", "x");
  checks::require_positive(N, "sum_of_squares", "N");
  const int64_t parts = ceil_div(N, kSquaresPerBlock);
  auto* partial = static_cast<double*>(ctx.scratch(size_t(parts + 1) * sizeof(double)));
  double* total = partial + parts;
  TESSEL_LAUNCH(squares_partial_kernel, unsigned(parts), kThreads, 0, ctx.stream())
  (partial, x, N, aligned16(x));
  TESSEL_CUDA_CHECK_LAUNCH("squares_partial_kernel");
  TESSEL_LAUNCH(squares_total_kernel, 1, 1024, 0, ctx.stream())(total, partial, parts);
  TESSEL_CUDA_CHECK_LAUNCH("squares_total_kernel");
  double result = 0.0;
  TESSEL_CUDA_CHECK(
      cudaMemcpyAsync(&result, total, sizeof result, cudaMemcpyDeviceToHost, ctx.stream()));
  TESSEL_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  return result;
}

double global_norm(const float* x, int64_t N, Context& ctx) {
  return std::sqrt(sum_of_squares(x, N, ctx));
}

}  // namespace tessel::kernels::cuda
