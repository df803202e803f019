#include <cub/device/device_radix_sort.cuh>
#include <limits>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/launch.cuh"

namespace tessel::kernels::cuda {
namespace {

using namespace detail;
namespace checks = cpu::detail;

constexpr int kThreads = 128;

void check_shape(const char* op, int B, int T, int C, int V) {
  checks::require_positive(B, op, "B");
  checks::require_positive(T, op, "T");
  checks::require_positive(C, op, "C");
  checks::require_positive(V, op, "V");
}

// One thread per 8 channels of one position.
__global__ void encoder_forward_kernel(bf16* out, const int* inp, const bf16* wte, const bf16* wpe,
                                       int64_t BT, int T, int C, int V, bool vector) {
  const int chunks = (C + 7) / 8;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= BT * chunks) return;
  const int64_t bt = idx / chunks;
  const int c = int(idx % chunks) * 8;
  const int n = min(8, C - c);
  const int t = int(bt % T);
  const int token = inp[bt];
  float a[8], b[8];
  if (token < 0 || token >= V) {
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = __int_as_float(0x7fc00000);  // NaN: a bad token shows
  } else {
    load8(wte + int64_t(token) * C + c, n, vector, a);
    load8(wpe + int64_t(t) * C + c, n, vector, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] += b[j];
  }
  store8(out + bt * C + c, n, vector, a);
}

// dwpe[t, c] += sum over b of dout[b, t, c], b in order: one thread per 8 channels of a position.
__global__ void position_gradient_kernel(float* dwpe, const bf16* dout, int B, int T, int C,
                                         bool vector_bf16, bool vector_f32) {
  const int chunks = (C + 7) / 8;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(T) * chunks) return;
  const int t = int(idx / chunks);
  const int c = int(idx % chunks) * 8;
  const int n = min(8, C - c);
  float sum[8] = {}, d[8];
  for (int b = 0; b < B; ++b) {
    load8(dout + (int64_t(b) * T + t) * C + c, n, vector_bf16, d);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum[j] += d[j];
  }
  float acc[8];
  load8(dwpe + int64_t(t) * C + c, n, vector_f32, acc);
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j] += sum[j];
  store8(dwpe + int64_t(t) * C + c, n, vector_f32, acc);
}

__global__ void iota_kernel(int* positions, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) positions[i] = int(i);
}

// Block i of x looks at sorted position i; if it starts a run of one token, its threads (8
// channels each, blockIdx.y picks the channel range) sum dout over the run in position order and
// add the sums to the token's row of dwte. Every row is written by one block: no atomics.
__global__ void token_gradient_kernel(float* dwte, const bf16* dout, const int* tokens_sorted,
                                      const int* positions_sorted, int BT, int C, int V,
                                      bool vector_bf16, bool vector_f32) {
  const int i = blockIdx.x;
  const int token = tokens_sorted[i];
  if (i > 0 && tokens_sorted[i - 1] == token) return;
  if (token < 0 || token >= V) return;
  const int c = (blockIdx.y * blockDim.x + threadIdx.x) * 8;
  if (c >= C) return;
  const int n = min(8, C - c);
  float sum[8] = {}, d[8];
  for (int j = i; j < BT && tokens_sorted[j] == token; ++j) {
    load8(dout + int64_t(positions_sorted[j]) * C + c, n, vector_bf16, d);
#pragma unroll
    for (int k = 0; k < 8; ++k) sum[k] += d[k];
  }
  float acc[8];
  load8(dwte + int64_t(token) * C + c, n, vector_f32, acc);
#pragma unroll
  for (int k = 0; k < 8; ++k) acc[k] += sum[k];
  store8(dwte + int64_t(token) * C + c, n, vector_f32, acc);
}

size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

void encoder_forward(bf16* out, const int* inp, const bf16* wte, const bf16* wpe, int B, int T,
                     int C, int V, Context& ctx) {
  constexpr const char* kOp = "encoder_forward";
  checks::require_pointer(out, kOp, "out");
  checks::require_pointer(inp, kOp, "inp");
  checks::require_pointer(wte, kOp, "wte");
  checks::require_pointer(wpe, kOp, "wpe");
  check_shape(kOp, B, T, C, V);
  const int64_t BT = int64_t(B) * T;
  const bool vector = C % 8 == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe);
  const int64_t threads = BT * ceil_div(C, 8);
  TESSEL_LAUNCH(encoder_forward_kernel, unsigned(ceil_div(threads, kThreads)), kThreads, 0,
                ctx.stream())
  (out, inp, wte, wpe, BT, T, C, V, vector);
  TESSEL_CUDA_CHECK_LAUNCH("encoder_forward_kernel");
}

void encoder_backward(float* dwte, float* dwpe, const bf16* dout, const int* inp, int B, int T,
                      int C, int V, Context& ctx) {
  constexpr const char* kOp = "encoder_backward";
  checks::require_pointer(dwte, kOp, "dwte");
  checks::require_pointer(dwpe, kOp, "dwpe");
  checks::require_pointer(dout, kOp, "dout");
  checks::require_pointer(inp, kOp, "inp");
  check_shape(kOp, B, T, C, V);
  const int64_t BT = int64_t(B) * T;
  if (BT > std::numeric_limits<int>::max()) {
    checks::throw_invalid(kOp, "B*T=" + std::to_string(BT) + " is above the int range");
  }
  const cudaStream_t stream = ctx.stream();
  const bool vector_bf16 = C % 8 == 0 && aligned16(dout);
  const bool vector_f32 = C % 4 == 0 && aligned16(dwte) && aligned16(dwpe);

  const int64_t position_threads = int64_t(T) * ceil_div(C, 8);
  TESSEL_LAUNCH(position_gradient_kernel, unsigned(ceil_div(position_threads, kThreads)), kThreads,
                0, stream)
  (dwpe, dout, B, T, C, vector_bf16, vector_f32);
  TESSEL_CUDA_CHECK_LAUNCH("position_gradient_kernel");

  // Scratch: sorted tokens, positions, sorted positions, then CUB's own temporary storage.
  // The sort is stable, so each token's positions stay in increasing order.
  const int n = int(BT);
  size_t sort_bytes = 0;
  TESSEL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, inp, static_cast<int*>(nullptr), static_cast<const int*>(nullptr),
      static_cast<int*>(nullptr), n, 0, int(sizeof(int) * 8), stream));
  const size_t ints = round_up(size_t(n) * sizeof(int));
  auto* base = static_cast<char*>(ctx.scratch(3 * ints + sort_bytes));
  int* tokens_sorted = reinterpret_cast<int*>(base);
  int* positions = reinterpret_cast<int*>(base + ints);
  int* positions_sorted = reinterpret_cast<int*>(base + 2 * ints);
  void* sort_storage = base + 3 * ints;

  TESSEL_LAUNCH(iota_kernel, unsigned(ceil_div(n, 256)), 256, 0, stream)(positions, n);
  TESSEL_CUDA_CHECK_LAUNCH("iota_kernel");
  TESSEL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_storage, sort_bytes, inp, tokens_sorted,
                                                    positions, positions_sorted, n, 0,
                                                    int(sizeof(int) * 8), stream));
  const dim3 grid(unsigned(n), unsigned(ceil_div(ceil_div(C, 8), kThreads)));
  TESSEL_LAUNCH(token_gradient_kernel, grid, kThreads, 0, stream)
  (dwte, dout, tokens_sorted, positions_sorted, n, C, V, vector_bf16, vector_f32);
  TESSEL_CUDA_CHECK_LAUNCH("token_gradient_kernel");
}

}  // namespace tessel::kernels::cuda
