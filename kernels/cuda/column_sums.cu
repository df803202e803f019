#include "kernels/cuda/check.h"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/launch.cuh"

namespace tessel::kernels::cuda::detail {
namespace {

constexpr int kWarps = 8;

// A block takes 32 columns (one per lane, so each warp reads 128 contiguous bytes per part);
// warp w sums parts w, w + 8, ... and warp 0 adds the 8 warp sums in warp order.
__global__ void add_column_sums_kernel(float* out, const float* partial, int parts, int64_t stride,
                                       int columns) {
  __shared__ float warp_sums[kWarps][kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int c = blockIdx.x * kWarpSize + lane;
  float sum = 0.0f;
  if (c < columns) {
#pragma unroll 4
    for (int p = warp; p < parts; p += kWarps) sum += partial[int64_t(p) * stride + c];
  }
  warp_sums[warp][lane] = sum;
  __syncthreads();
  if (warp == 0 && c < columns) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += warp_sums[w][lane];
    out[c] += total;
  }
}

}  // namespace

void add_column_sums(float* out, const float* partial, int parts, int64_t stride, int columns,
                     cudaStream_t stream) {
  TESSEL_LAUNCH(add_column_sums_kernel, unsigned(ceil_div(columns, kWarpSize)), kWarps * kWarpSize,
                0, stream)
  (out, partial, parts, stride, columns);
  TESSEL_CUDA_CHECK_LAUNCH("add_column_sums_kernel");
}

}  // namespace tessel::kernels::cuda::detail
