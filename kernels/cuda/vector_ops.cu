#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector_ops.h"

namespace tessel::kernels::cuda {
namespace {

using namespace detail;
namespace checks = cpu::detail;

constexpr int kThreads = 256;

// Each thread takes 8 consecutive elements: two 16-byte accesses per array when aligned.
__global__ void scaled_add_kernel(float* y, const float* x, float alpha, int64_t N, bool vector) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= N) return;
  const int n = int(min(int64_t(8), N - i));
  float a[8], b[8];
  load8(y + i, n, vector, a);
  load8(x + i, n, vector, b);
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] += alpha * b[j];
  store8(y + i, n, vector, a);
}

__global__ void copy_to_bf16_kernel(bf16* out, const float* inp, int64_t N, bool vector) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= N) return;
  const int n = int(min(int64_t(8), N - i));
  float a[8];
  load8(inp + i, n, vector, a);
  store8(out + i, n, vector, a);
}

unsigned blocks_for(int64_t N) { return unsigned(ceil_div(N, 8 * kThreads)); }

}  // namespace

void zero(float* x, int64_t N, Context& ctx) {
  checks::require_pointer(x, "zero", "x");
  checks::require_positive(N, "zero", "N");
  TESSEL_CUDA_CHECK(cudaMemsetAsync(x, 0, size_t(N) * sizeof(float), ctx.stream()));
}

void scaled_add(float* y, const float* x, float alpha, int64_t N, Context& ctx) {
  checks::require_pointer(y, "scaled_add", "y");
  checks::require_pointer(x, "scaled_add", "x");
  checks::require_positive(N, "scaled_add", "N");
  const bool vector = aligned16(y) && aligned16(x);
  TESSEL_LAUNCH(scaled_add_kernel, blocks_for(N), kThreads, 0, ctx.stream())
  (y, x, alpha, N, vector);
  TESSEL_CUDA_CHECK_LAUNCH("scaled_add_kernel");
}

void copy_to_bf16(bf16* out, const float* inp, int64_t N, Context& ctx) {
  checks::require_pointer(out, "copy_to_bf16", "out");
  checks::require_pointer(inp, "copy_to_bf16", "inp");
  checks::require_positive(N, "copy_to_bf16", "N");
  const bool vector = aligned16(out) && aligned16(inp);
  TESSEL_LAUNCH(copy_to_bf16_kernel, blocks_for(N), kThreads, 0, ctx.stream())(out, inp, N, vector);
  TESSEL_CUDA_CHECK_LAUNCH("copy_to_bf16_kernel");
}

}  // namespace tessel::kernels::cuda
