// The tensor-core instructions the attention kernels use (internal to kernels/cuda): the wrappers
// of warp_instructions.cuh, and how their fragments are laid out.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4), which the kernels rely on:
//   A (16 x 16, row major), 4 registers of 2 bf16: a0 = A[g][2t..2t+1], a1 = A[g+8][2t..],
//     a2 = A[g][2t+8..], a3 = A[g+8][2t+8..];
//   B (16 x 8, k x n), 2 registers: b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g];
//   C/D (16 x 8, fp32), 4 floats: c0, c1 = C[g][2t..2t+1], c2, c3 = C[g+8][2t..2t+1].
// ldmatrix.x4 loads four 8 x 8 bf16 matrices; lanes 8i..8i+7 give the row addresses of matrix i,
// and lane l receives row l/4, columns 2(l%4)..+1 of each (with .trans: rows 2(l%4)..+1 of
// column l/4). So a 16 x 16 A tile, or two 8-column B tiles, is one ldmatrix.x4.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/warp_instructions.cuh"

namespace tessel::kernels::cuda::detail {

// Two floats as a bf16 pair, `low` in the low half (the lower-indexed element of a fragment).
__device__ __forceinline__ uint32_t pack_bf16(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// The fp32 accumulators of two adjacent 16 x 8 tiles (columns 16k .. 16k+7 and 16k+8 .. 16k+15)
// as the bf16 A fragment of the k-step over those 16 columns: row g's pairs go to a0 and a2, row
// g + 8's to a1 and a3, as the layouts above line up.
__device__ __forceinline__ void a_fragment_of(uint32_t (&a)[4], const float (&left)[4],
                                              const float (&right)[4]) {
  a[0] = pack_bf16(left[0], left[1]);
  a[1] = pack_bf16(left[2], left[3]);
  a[2] = pack_bf16(right[0], right[1]);
  a[3] = pack_bf16(right[2], right[3]);
}

}  // namespace tessel::kernels::cuda::detail
