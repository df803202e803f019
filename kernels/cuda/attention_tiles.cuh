// What the attention forward and backward kernels share (internal to kernels/cuda): argument
// checks, tile shapes and the loader of q/k/v/dout tiles into padded shared memory.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/mma.cuh"

namespace tessel::kernels::cuda::detail {

inline constexpr float kLog2e = 1.4426950408889634f;

// Shared-memory rows of a tile are HS + 8 elements apart: the 16 extra bytes shift each row by
// four banks, so the 8 row addresses of an ldmatrix hit 8 different groups of 4 banks.
template <int HS>
inline constexpr int kTileStride = HS + 8;

// Checks the shapes and returns HS = C / NH; throws std::invalid_argument naming the op.
inline int attention_head_size(const char* op, int B, int T, int C, int NH) {
  namespace checks = cpu::detail;
  checks::require_positive(B, op, "B");
  checks::require_positive(T, op, "T");
  checks::require_positive(C, op, "C");
  checks::require_positive(NH, op, "NH");
  if (C % NH != 0) {
    checks::throw_invalid(
        op, "C=" + std::to_string(C) + " is not a multiple of NH=" + std::to_string(NH));
  }
  const int HS = C / NH;
  if (HS != 64 && HS != 128) {
    checks::throw_invalid(op, "head size C/NH=" + std::to_string(HS) +
                                  " is not supported (the CUDA kernel takes 64 or 128)");
  }
  return HS;
}

inline void require_aligned16(const void* p, const char* op, const char* name) {
  if (!aligned16(p)) {
    cpu::detail::throw_invalid(op, std::string("argument '") + name + "' is not 16-byte aligned");
  }
}

// Queues cp.async copies of rows [row0, row0 + kRows) of one head's columns into `tile`
// (kRows x kTileStride<HS> bf16). `head` points at row 0 of the head's first column, rows are
// `row_stride` elements apart; rows at or past T are filled with zeros. All kThreads threads of
// the block take part; the caller commits and waits.
template <int kRows, int HS, int kThreads>
__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* head,
                                          int64_t row_stride, int row0, int T) {
  constexpr int kChunks = HS / 8;  // 16-byte chunks per row
#pragma unroll
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks;
    const int chunk = i % kChunks;
    const int t = row0 + r;
    const bool valid = t < T;
    cp_async16(tile + r * kTileStride<HS> + chunk * 8,
               head + int64_t(valid ? t : 0) * row_stride + chunk * 8, valid);
  }
}

}  // namespace tessel::kernels::cuda::detail
