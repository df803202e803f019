#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layernorm.h"

namespace tessel::kernels::cuda {
namespace {

using namespace detail;
namespace checks = cpu::detail;

constexpr int kForwardThreads = 256;  // 8 warps: 8 rows per block
constexpr int kBackwardThreads = 256;
constexpr int kBackwardRows = 32;  // rows per block of the backward pass

void check_shape(const char* op, int B, int T, int C) {
  checks::require_positive(B, op, "B");
  checks::require_positive(T, op, "T");
  checks::require_positive(C, op, "C");
}

__device__ __forceinline__ float round_to_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

// One warp per row; each lane takes 8 consecutive channels in every 256. Three passes over the
// row (sum, squared deviations, output); the second and third read it again from L1/L2. With
// kResidual the first pass also forms x = inp1 + inp2, rounds it to bf16 and stores it in
// `residual`, from where the later passes read it back (each lane its own elements).
template <bool kResidual>
__global__ void layernorm_forward_kernel(bf16* residual, bf16* out, float* mean, float* rstd,
                                         const bf16* inp1, const bf16* inp2, const bf16* weight,
                                         const bf16* bias, int64_t rows, int C, bool vector) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % kWarpSize;
  const int64_t offset = row * C;
  const bf16* x = kResidual ? residual + offset : inp1 + offset;

  float sum = 0.0f;
  for (int c = lane * 8; c < C; c += kWarpSize * 8) {
    const int n = min(8, C - c);
    float a[8];
    load8(inp1 + offset + c, n, vector, a);
    if constexpr (kResidual) {
      float b[8];
      load8(inp2 + offset + c, n, vector, b);
#pragma unroll
      for (int j = 0; j < 8; ++j) a[j] = round_to_bf16(a[j] + b[j]);
      store8(residual + offset + c, n, vector, a);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += a[j];  // lanes past the tail read as 0
  }
  const float m = warp_sum(sum) / float(C);

  float squares = 0.0f;
  for (int c = lane * 8; c < C; c += kWarpSize * 8) {
    const int n = min(8, C - c);
    float a[8];
    load8(x + c, n, vector, a);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float d = a[j] - m;
      squares += j < n ? d * d : 0.0f;
    }
  }
  const float s = rsqrtf(warp_sum(squares) / float(C) + kLayerNormEps);

  for (int c = lane * 8; c < C; c += kWarpSize * 8) {
    const int n = min(8, C - c);
    float a[8], w[8], b[8];
    load8(x + c, n, vector, a);
    load8(weight + c, n, vector, w);
    load8(bias + c, n, vector, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = (a[j] - m) * s * w[j] + b[j];
    store8(out + offset + c, n, vector, a);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// One block per kBackwardRows rows. Phase 1, a warp per row: the row's means of dnorm = dout * w
// and of dnorm * xhat. Phase 2, threads across the channels (8 each), rows in order: dinp +=
// rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat)), and the block's column sums of dout * xhat
// and dout, written to partial (2 * C floats per block) for add_column_sums.
__global__ void layernorm_backward_kernel(bf16* dinp, float* partial, const bf16* dout,
                                          const bf16* inp, const bf16* weight, const float* mean,
                                          const float* rstd, int64_t rows, int C, bool vector,
                                          bool vector_partial) {
  __shared__ float row_mean[kBackwardRows], row_rstd[kBackwardRows];
  __shared__ float dnorm_mean[kBackwardRows], dnorm_xhat_mean[kBackwardRows];
  const int64_t row0 = int64_t(blockIdx.x) * kBackwardRows;
  const int block_rows = int(min(int64_t(kBackwardRows), rows - row0));
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  constexpr int kWarps = kBackwardThreads / kWarpSize;

  for (int r = warp; r < block_rows; r += kWarps) {
    const int64_t offset = (row0 + r) * C;
    const float m = mean[row0 + r];
    const float s = rstd[row0 + r];
    float sum_dnorm = 0.0f, sum_dnorm_xhat = 0.0f;
    for (int c = lane * 8; c < C; c += kWarpSize * 8) {
      const int n = min(8, C - c);
      float d[8], x[8], w[8];
      load8(dout + offset + c, n, vector, d);
      load8(inp + offset + c, n, vector, x);
      load8(weight + c, n, vector, w);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float dnorm = d[j] * w[j];  // 0 past the tail
        sum_dnorm += dnorm;
        sum_dnorm_xhat += dnorm * (x[j] - m) * s;
      }
    }
    sum_dnorm = warp_sum(sum_dnorm);
    sum_dnorm_xhat = warp_sum(sum_dnorm_xhat);
    if (lane == 0) {
      row_mean[r] = m;
      row_rstd[r] = s;
      dnorm_mean[r] = sum_dnorm / float(C);
      dnorm_xhat_mean[r] = sum_dnorm_xhat / float(C);
    }
  }
  __syncthreads();

  for (int c = threadIdx.x * 8; c < C; c += kBackwardThreads * 8) {
    const int n = min(8, C - c);
    float w[8], dweight[8] = {}, dbias[8] = {};
    load8(weight + c, n, vector, w);
#pragma unroll 4
    for (int r = 0; r < block_rows; ++r) {
      const int64_t offset = (row0 + r) * C + c;
      float d[8], x[8], g[8];
      load8(dout + offset, n, vector, d);
      load8(inp + offset, n, vector, x);
      load8(dinp + offset, n, vector, g);
      const float m = row_mean[r], s = row_rstd[r];
      const float dm = dnorm_mean[r], dxm = dnorm_xhat_mean[r];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float xhat = (x[j] - m) * s;
        g[j] += s * (d[j] * w[j] - dm - xhat * dxm);
        dweight[j] += d[j] * xhat;
        dbias[j] += d[j];
      }
      store8(dinp + offset, n, vector, g);
    }
    float* block_partial = partial + int64_t(blockIdx.x) * 2 * C;
    store8(block_partial + c, n, vector_partial, dweight);
    store8(block_partial + C + c, n, vector_partial, dbias);
  }
}

void launch_forward(bool residual_add, bf16* residual, bf16* out, float* mean, float* rstd,
                    const bf16* inp1, const bf16* inp2, const bf16* weight, const bf16* bias, int B,
                    int T, int C, Context& ctx) {
  const int64_t rows = int64_t(B) * T;
  const bool vector = C % 8 == 0 && aligned16(out) && aligned16(inp1) && aligned16(weight) &&
                      aligned16(bias) &&
                      (!residual_add || (aligned16(residual) && aligned16(inp2)));
  const unsigned blocks = unsigned(ceil_div(rows, kForwardThreads / kWarpSize));
  if (residual_add) {
    TESSEL_LAUNCH(layernorm_forward_kernel<true>, blocks, kForwardThreads, 0, ctx.stream())
    (residual, out, mean, rstd, inp1, inp2, weight, bias, rows, C, vector);
  } else {
    TESSEL_LAUNCH(layernorm_forward_kernel<false>, blocks, kForwardThreads, 0, ctx.stream())
    (residual, out, mean, rstd, inp1, inp2, weight, bias, rows, C, vector);
  }
  TESSEL_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

}  // namespace

void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                       const bf16* bias, int B, int T, int C, Context& ctx) {
  constexpr const char* kOp = "layernorm_forward";
  checks::require_pointer(out, kOp, "out");
  checks::require_pointer(mean, kOp, "mean");
  checks::require_pointer(rstd, kOp, "rstd");
  checks::require_pointer(inp, kOp, "inp");
  checks::require_pointer(weight, kOp, "weight");
  checks::require_pointer(bias, kOp, "bias");
  check_shape(kOp, B, T, C);
  launch_forward(false, nullptr, out, mean, rstd, inp, nullptr, weight, bias, B, T, C, ctx);
}

void residual_layernorm_forward(bf16* residual, bf16* out, float* mean, float* rstd,
                                const bf16* inp1, const bf16* inp2, const bf16* weight,
                                const bf16* bias, int B, int T, int C, Context& ctx) {
  constexpr const char* kOp = "residual_layernorm_forward";
  checks::require_pointer(residual, kOp, "residual");
  checks::require_pointer(out, kOp, "out");
  checks::require_pointer(mean, kOp, "mean");
  checks::require_pointer(rstd, kOp, "rstd");
  checks::require_pointer(inp1, kOp, "inp1");
  checks::require_pointer(inp2, kOp, "inp2");
  checks::require_pointer(weight, kOp, "weight");
  checks::require_pointer(bias, kOp, "bias");
  check_shape(kOp, B, T, C);
  launch_forward(true, residual, out, mean, rstd, inp1, inp2, weight, bias, B, T, C, ctx);
}

void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const bf16* weight, const float* mean, const float* rstd, int B, int T,
                        int C, Context& ctx) {
  constexpr const char* kOp = "layernorm_backward";
  checks::require_pointer(dinp, kOp, "dinp");
  checks::require_pointer(dweight, kOp, "dweight");
  checks::require_pointer(dbias, kOp, "dbias");
  checks::require_pointer(dout, kOp, "dout");
  checks::require_pointer(inp, kOp, "inp");
  checks::require_pointer(weight, kOp, "weight");
  checks::require_pointer(mean, kOp, "mean");
  checks::require_pointer(rstd, kOp, "rstd");
  check_shape(kOp, B, T, C);
  const int64_t rows = int64_t(B) * T;
  const int blocks = int(ceil_div(rows, kBackwardRows));
  auto* partial = static_cast<float*>(ctx.scratch(size_t(blocks) * 2 * C * sizeof(float)));
  const bool vector =
      C % 8 == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
  const bool vector_partial = C % 4 == 0;  // scratch is 256-byte aligned
  TESSEL_LAUNCH(layernorm_backward_kernel, unsigned(blocks), kBackwardThreads, 0, ctx.stream())
  (dinp, partial, dout, inp, weight, mean, rstd, rows, C, vector, vector_partial);
  TESSEL_CUDA_CHECK_LAUNCH("layernorm_backward_kernel");
  add_column_sums(dweight, partial, blocks, 2 * int64_t(C), C, ctx.stream());
  add_column_sums(dbias, partial + C, blocks, 2 * int64_t(C), C, ctx.stream());
}

}  // namespace tessel::kernels::cuda
