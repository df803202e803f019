// Thin wrappers over the PTX the attention kernels use (internal to kernels/cuda; sm_80 and
// later, so plain sm_90, but for the two-float atomic of sm_90): asynchronous 16-byte copies into
// shared memory, ldmatrix, the bf16 tensor-core product mma.m16n8k16 with fp32 accumulators,
// plain shared loads and stores, and the two-float global atomic add. Fragment layouts:
// mma.cuh. The SIMT emulator has a header of this name of its own, found first on its include
// path (tests/support/simt/include/kernels/cuda/warp_instructions.cuh), which works from the PTX
// ISA's statement of these layouts and checks shared memory for races.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace tessel::kernels::cuda::detail {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory, bypassing L1; when !valid, 16 zero bytes (src is then
// not read, but must still be a valid address).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most `pending` committed groups of this thread are still in flight.
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row_address))
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row_address))
               : "memory");
}

// d += a b for one 16 x 8 x 16 tile.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A 4-byte store to shared memory (the emulator checks it for races).
__device__ __forceinline__ void store_shared_b32(void* p, uint32_t value) {
  *static_cast<uint32_t*>(p) = value;
}

// Two floats from shared memory, 8-byte aligned (the emulator checks the read for races).
__device__ __forceinline__ float2 load_shared_f32x2(const float* p) {
  return *reinterpret_cast<const float2*>(p);
}

// p[0] += x, p[1] += y in global memory as one vector atomic (sm_90); p 8-byte aligned.
__device__ __forceinline__ void atomic_add_f32x2(float* p, float x, float y) {
  atomicAdd(reinterpret_cast<float2*>(p), float2{x, y});
}

}  // namespace tessel::kernels::cuda::detail
