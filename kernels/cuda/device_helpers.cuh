// Device-side building blocks shared by the kernels (internal to kernels/cuda): warp and block
// reductions, 16-byte bf16 loads and stores with scalar tails, and small host helpers for launch
// shapes. Included by .cu files only.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace tessel::kernels::cuda::detail {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kWarpSize = 32;

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether 16-byte vector accesses at p are aligned.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

// The sum of v over the calling block (blockDim.x a multiple of 32), returned to every thread,
// added in the same order on every call. `shared` holds 32 floats; all threads must call it.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_sum(v);
  __syncthreads();  // earlier readers of `shared` are done
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(v);
}

// Eight bf16 in 16 bytes.
struct alignas(16) Bf16x8 {
  __nv_bfloat162 pair[4];
};

__device__ __forceinline__ void load8(const __nv_bfloat16* p, float (&v)[8]) {
  const Bf16x8 x = *reinterpret_cast<const Bf16x8*>(p);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(x.pair[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ void store8(__nv_bfloat16* p, const float (&v)[8]) {
  Bf16x8 x;
#pragma unroll
  for (int i = 0; i < 4; ++i) x.pair[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<Bf16x8*>(p) = x;
}

// The eight elements at p when `vector` (16-byte aligned, all eight in bounds), else the first
// n (< 8 at a tail, or all 8 when unaligned) one by one; the rest read as 0.
__device__ __forceinline__ void load8(const __nv_bfloat16* p, int n, bool vector, float (&v)[8]) {
  if (vector && n == 8) {
    load8(p, v);
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = i < n ? __bfloat162float(p[i]) : 0.0f;
}

__device__ __forceinline__ void store8(__nv_bfloat16* p, int n, bool vector, const float (&v)[8]) {
  if (vector && n == 8) {
    store8(p, v);
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (i < n) p[i] = __float2bfloat16_rn(v[i]);
  }
}

// Eight floats, two 16-byte accesses when `vector`.
__device__ __forceinline__ void load8(const float* p, int n, bool vector, float (&v)[8]) {
  if (vector && n == 8) {
    const float4 a = reinterpret_cast<const float4*>(p)[0];
    const float4 b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = i < n ? p[i] : 0.0f;
}

__device__ __forceinline__ void store8(float* p, int n, bool vector, const float (&v)[8]) {
  if (vector && n == 8) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (i < n) p[i] = v[i];
  }
}

}  // namespace tessel::kernels::cuda::detail
