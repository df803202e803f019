#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/residual.h"

namespace tessel::kernels::cuda {
namespace {

using namespace detail;
namespace checks = cpu::detail;

constexpr int kThreads = 256;

// Each thread takes 8 consecutive elements (one 16-byte access per array when aligned).
__global__ void residual_forward_kernel(bf16* out, const bf16* inp1, const bf16* inp2, int64_t N,
                                        bool vector) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= N) return;
  const int n = int(min(int64_t(8), N - i));
  float a[8], b[8];
  load8(inp1 + i, n, vector, a);
  load8(inp2 + i, n, vector, b);
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] += b[j];
  store8(out + i, n, vector, a);
}

__global__ void residual_backward_kernel(bf16* dinp1, bf16* dinp2, const bf16* dout, int64_t N,
                                         bool vector) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= N) return;
  const int n = int(min(int64_t(8), N - i));
  float d[8], a[8], b[8];
  load8(dout + i, n, vector, d);
  load8(dinp1 + i, n, vector, a);
  load8(dinp2 + i, n, vector, b);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    a[j] += d[j];
    b[j] += d[j];
  }
  store8(dinp1 + i, n, vector, a);
  store8(dinp2 + i, n, vector, b);
}

unsigned blocks_for(int64_t N) { return unsigned(ceil_div(N, 8 * kThreads)); }

}  // namespace

void residual_forward(bf16* out, const bf16* inp1, const bf16* inp2, int64_t N, Context& ctx) {
  constexpr const char* kOp = "residual_forward";
  checks::require_pointer(out, kOp, "out");
  checks::require_pointer(inp1, kOp, "inp1");
  checks::require_pointer(inp2, kOp, "inp2");
  checks::require_positive(N, kOp, "N");
  const bool vector = aligned16(out) && aligned16(inp1) && aligned16(inp2);
  TESSEL_LAUNCH(residual_forward_kernel, blocks_for(N), kThreads, 0, ctx.stream())
  (out, inp1, inp2, N, vector);
  TESSEL_CUDA_CHECK_LAUNCH("residual_forward_kernel");
}

void residual_backward(bf16* dinp1, bf16* dinp2, const bf16* dout, int64_t N, Context& ctx) {
  constexpr const char* kOp = "residual_backward";
  checks::require_pointer(dinp1, kOp, "dinp1");
  checks::require_pointer(dinp2, kOp, "dinp2");
  checks::require_pointer(dout, kOp, "dout");
  checks::require_positive(N, kOp, "N");
  const bool vector = aligned16(dinp1) && aligned16(dinp2) && aligned16(dout);
  TESSEL_LAUNCH(residual_backward_kernel, blocks_for(N), kThreads, 0, ctx.stream())
  (dinp1, dinp2, dout, N, vector);
  TESSEL_CUDA_CHECK_LAUNCH("residual_backward_kernel");
}

}  // namespace tessel::kernels::cuda
