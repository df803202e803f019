// The SIMT emulator's kernels/cuda/warp_instructions.cuh: the same wrappers as the product's
// (cp.async, ldmatrix, mma.m16n8k16 bf16, plain shared loads and stores, the two-float global
// atomic), each the emulator's, which computes from the PTX ISA's fragment layouts and checks
// shared memory for races (tests/support/simt/simt.h).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "tests/support/simt/simt.h"

namespace tessel::kernels::cuda::detail {

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  ::tessel::simt::cp_async16(dst, src, valid);
}
__device__ __forceinline__ void cp_async_commit() { ::tessel::simt::cp_async_commit(); }
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
  ::tessel::simt::cp_async_wait(pending);
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_address) {
  ::tessel::simt::ldmatrix_x4(r, row_address, false);
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_address) {
  ::tessel::simt::ldmatrix_x4(r, row_address, true);
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  ::tessel::simt::mma_m16n8k16_bf16(d, a, b0, b1);
}
__device__ __forceinline__ void store_shared_b32(void* p, uint32_t value) {
  ::tessel::simt::note_shared_write(p, sizeof value);
  std::memcpy(p, &value, sizeof value);
}
__device__ __forceinline__ float2 load_shared_f32x2(const float* p) {
  ::tessel::simt::note_shared_read(p, sizeof(float2));
  return float2{p[0], p[1]};
}
__device__ __forceinline__ void atomic_add_f32x2(float* p, float x, float y) {
  p[0] += x;
  p[1] += y;
}

}  // namespace tessel::kernels::cuda::detail
