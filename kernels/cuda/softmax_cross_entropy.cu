#include <cstdint>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/softmax_cross_entropy.h"

namespace tessel::kernels::cuda {
namespace {

using namespace detail;
namespace checks = cpu::detail;

// 1024 threads a row: two rows in flight per SM, so the rows that all SMs read between a row's
// first pass and its second (264 of 100 KB at V = 50257 on 132 SMs) stay well inside the L2
// (50-60 MB on an H100/H200), and the second pass reads from it rather than from memory.
constexpr int kThreads = 1024;

// A row of V bf16 as a scalar head up to the first 16-byte boundary, a body of 8-element chunks
// and a scalar tail; f(index, value) is called for every element, each by one thread.
struct RowSplit {
  int head;  // elements before the body
  int body;  // elements in the body, a multiple of 8
};

__device__ __forceinline__ RowSplit split_row(const __nv_bfloat16* row, int V) {
  const int misalignment = int(reinterpret_cast<uintptr_t>(row) % 16);  // even: bf16-aligned
  const int head = min(V, ((16 - misalignment) % 16) / 2);
  return {head, (V - head) / 8 * 8};
}

template <class F>
__device__ __forceinline__ void for_each_in_row(const __nv_bfloat16* row, int V, RowSplit split,
                                                F&& f) {
  for (int i = threadIdx.x; i < split.head; i += blockDim.x) f(i, __bfloat162float(row[i]));
  for (int i = split.head + split.body + threadIdx.x; i < V; i += blockDim.x) {
    f(i, __bfloat162float(row[i]));
  }
  for (int c = threadIdx.x; c < split.body / 8; c += blockDim.x) {
    const int i = split.head + c * 8;
    float x[8];
    load8(row + i, x);
#pragma unroll
    for (int j = 0; j < 8; ++j) f(i + j, x[j]);
  }
}

// (max, sum of exp(x - max)) of two parts, as one; an empty part is (-inf, 0).
__device__ __forceinline__ void combine(float& m, float& s, float other_m, float other_s) {
  const float new_m = fmaxf(m, other_m);
  if (new_m == -INFINITY) return;  // both empty
  s = s * __expf(m - new_m) + other_s * __expf(other_m - new_m);
  m = new_m;
}

// One block per row. Pass 1: each thread keeps an online (max, sum of exponentials) over its
// elements; the block combines them. Pass 2 writes the gradient, reading the row again (from L2
// for rows in flight). In place is safe: an element is read and written by the same thread, and
// the target's logit is read before the block's first barrier, so before any write.
__global__ void __launch_bounds__(kThreads)
    softmax_cross_entropy_kernel(float* losses, __nv_bfloat16* dlogits, const __nv_bfloat16* logits,
                                 const int* targets, float dloss, int V, bool ignore_minus_one,
                                 bool vector_store) {
  __shared__ float shared_m[kThreads / kWarpSize], shared_s[kThreads / kWarpSize];
  const int64_t row_index = blockIdx.x;
  const __nv_bfloat16* row = logits + row_index * V;
  __nv_bfloat16* drow = dlogits == nullptr ? nullptr : dlogits + row_index * V;
  const int target = targets[row_index];
  const bool ignored = ignore_minus_one && target == -1;
  const bool valid = target >= 0 && target < V;
  if (ignored || !valid) {  // loss 0 and a zero row, or NaN for a bad target
    const float fill = ignored ? 0.0f : __int_as_float(0x7fc00000);
    if (threadIdx.x == 0) losses[row_index] = fill;
    if (drow != nullptr) {
      for (int i = threadIdx.x; i < V; i += blockDim.x) drow[i] = __float2bfloat16_rn(fill);
    }
    return;
  }
  const float target_logit = threadIdx.x == 0 ? __bfloat162float(row[target]) : 0.0f;
  const RowSplit split = split_row(row, V);

  float m = -INFINITY, s = 0.0f;
  for_each_in_row(row, V, split, [&](int, float x) {
    if (x > m) {
      s = s * __expf(m - x) + 1.0f;
      m = x;
    } else {
      s += __expf(x - m);
    }
  });
  for (int offset = 16; offset > 0; offset >>= 1) {
    combine(m, s, __shfl_xor_sync(kFullMask, m, offset), __shfl_xor_sync(kFullMask, s, offset));
  }
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  if (lane == 0) {
    shared_m[warp] = m;
    shared_s[warp] = s;
  }
  __syncthreads();
  m = -INFINITY;
  s = 0.0f;
  for (int w = 0; w < kThreads / kWarpSize; ++w) combine(m, s, shared_m[w], shared_s[w]);

  if (threadIdx.x == 0) losses[row_index] = __logf(s) + m - target_logit;
  if (drow == nullptr) return;
  const float scale = dloss / s;
  auto gradient = [&](int i, float x) {
    return __expf(x - m) * scale - (i == target ? dloss : 0.0f);
  };
  if (!vector_store) {
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
      drow[i] = __float2bfloat16_rn(gradient(i, __bfloat162float(row[i])));
    }
    return;
  }
  for (int i = threadIdx.x; i < split.head; i += blockDim.x) {
    drow[i] = __float2bfloat16_rn(gradient(i, __bfloat162float(row[i])));
  }
  for (int i = split.head + split.body + threadIdx.x; i < V; i += blockDim.x) {
    drow[i] = __float2bfloat16_rn(gradient(i, __bfloat162float(row[i])));
  }
  for (int c = threadIdx.x; c < split.body / 8; c += blockDim.x) {
    const int i = split.head + c * 8;
    float x[8];
    load8(row + i, x);
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = gradient(i + j, x[j]);
    store8(drow + i, x);
  }
}

}  // namespace

void softmax_cross_entropy(float* losses, bf16* dlogits, const bf16* logits, const int* targets,
                           float dloss, int B, int T, int V, IgnoreTarget ignore, Context& ctx) {
  constexpr const char* kOp = "softmax_cross_entropy";
  checks::require_pointer(losses, kOp, "losses");
  checks::require_pointer(logits, kOp, "logits");
  checks::require_pointer(targets, kOp, "targets");
  checks::require_positive(B, kOp, "B");
  checks::require_positive(T, kOp, "T");
  checks::require_positive(V, kOp, "V");
  // Vector stores need dlogits' rows to meet 16-byte boundaries where logits' rows do.
  const bool vector_store =
      dlogits != nullptr &&
      (reinterpret_cast<uintptr_t>(dlogits) - reinterpret_cast<uintptr_t>(logits)) % 16 == 0;
  TESSEL_LAUNCH(softmax_cross_entropy_kernel, unsigned(int64_t(B) * T), kThreads, 0, ctx.stream())
  (losses, dlogits, logits, targets, dloss, V, ignore == IgnoreTarget::kMinusOne, vector_store);
  TESSEL_CUDA_CHECK_LAUNCH("softmax_cross_entropy_kernel");
}

}  // namespace tessel::kernels::cuda
