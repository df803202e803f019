// The emulated tensor-core instructions, used together as kernels/cuda uses them: ldmatrix tiles
// out of shared memory, mma.m16n8k16 on them, the accumulator written out through its fragment
// layout, must give the matrix product. And cp.async copies land at their wait, and shared
// memory accesses that no barrier separates are reported.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma.cuh"

namespace {

using ::testing::HasSubstr;
using namespace tessel::kernels::cuda::detail;

uint16_t to_bf16(float f) {  // f is a bf16 value already: truncation is exact
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return uint16_t(bits >> 16);
}

std::string launch_error() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? "" : cudaGetErrorString(error);
}

// d (16 x 8, row major) = a (16 x 16, row major) b (16 x 8) + c, with b given as stored: row major
// (k x n) when `b_by_rows`, else its transpose (n x k, row major). Shared rows are padded to 24
// elements, as the attention kernels pad theirs.
__global__ void tile_product(float* d, const uint16_t* a, const uint16_t* b, const float* c,
                             bool b_by_rows) {
  constexpr int kStride = 24;
  TESSEL_DYNAMIC_SHARED(bytes);
  auto* a_tile = reinterpret_cast<uint16_t*>(bytes);
  auto* b_tile = a_tile + 16 * kStride;
  const int lane = threadIdx.x, mi = lane / 8, g = lane / 4, t = lane % 4;
  // Each lane copies one 16-byte chunk of A and, for B, one of its 16 (or 8) rows.
  cp_async16(a_tile + (lane / 2) * kStride + (lane % 2) * 8, a + (lane / 2) * 16 + (lane % 2) * 8,
             true);
  if (b_by_rows) {
    if (lane < 16) cp_async16(b_tile + lane * kStride, b + lane * 8, true);
  } else if (lane < 16) {
    cp_async16(b_tile + (lane / 2) * kStride + (lane % 2) * 8, b + (lane / 2) * 16 + (lane % 2) * 8,
               true);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  uint32_t a_frag[4];
  ldmatrix_x4(a_frag, a_tile + ((mi & 1) * 8 + lane % 8) * kStride + (mi >> 1) * 8);
  uint32_t b_frag[4];
  if (b_by_rows) {
    // k x n stored by rows: the transposing load; matrices 0 and 1 are k 0..7 and 8..15.
    ldmatrix_x4_trans(b_frag, b_tile + ((mi & 1) * 8 + lane % 8) * kStride);
  } else {
    // n x k stored by rows: matrices 0 and 1 are k 0..7 and 8..15 of the 8 columns.
    ldmatrix_x4(b_frag, b_tile + (lane % 8) * kStride + (mi & 1) * 8);
  }
  float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                  c[(g + 8) * 8 + 2 * t + 1]};
  mma_bf16(acc, a_frag, b_frag[0], b_frag[1]);
  d[g * 8 + 2 * t] = acc[0];
  d[g * 8 + 2 * t + 1] = acc[1];
  d[(g + 8) * 8 + 2 * t] = acc[2];
  d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

class SimtTileProduct : public ::testing::TestWithParam<bool> {};

TEST_P(SimtTileProduct, LdmatrixAndMmaGiveTheMatrixProduct) {
  const bool b_by_rows = GetParam();
  std::mt19937 rng(7);
  // Small integers are exact in bf16 and their products and sums exact in fp32.
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<float> A(16 * 16), B(16 * 8), C(16 * 8);
  for (float& x : A) x = float(small(rng));
  for (float& x : B) x = float(small(rng));
  for (float& x : C) x = float(small(rng));
  std::vector<uint16_t> a(A.size()), b(B.size());
  for (size_t i = 0; i < A.size(); ++i) a[i] = to_bf16(A[i]);
  for (int k = 0; k < 16; ++k) {
    for (int n = 0; n < 8; ++n) b[b_by_rows ? k * 8 + n : n * 16 + k] = to_bf16(B[k * 8 + n]);
  }
  alignas(16) uint16_t a_aligned[256];
  alignas(16) uint16_t b_aligned[128];
  std::memcpy(a_aligned, a.data(), sizeof a_aligned);
  std::memcpy(b_aligned, b.data(), sizeof b_aligned);
  std::vector<float> d(16 * 8, -1.0f);
  TESSEL_LAUNCH(tile_product, 1, 32, 2 * 16 * 24 * sizeof(uint16_t), nullptr)
  (d.data(), a_aligned, b_aligned, C.data(), b_by_rows);
  ASSERT_EQ(launch_error(), "");
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      float expected = C[m * 8 + n];
      for (int k = 0; k < 16; ++k) expected += A[m * 16 + k] * B[k * 8 + n];
      EXPECT_EQ(d[m * 8 + n], expected) << "d[" << m << "][" << n << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BStoredByRowsAndByColumns, SimtTileProduct, ::testing::Bool());

// Thread 0 reads its own cp.async destination before and after the wait.
__global__ void copy_then_read(float* seen, const float* src) {
  TESSEL_DYNAMIC_SHARED(bytes);
  auto* dst = reinterpret_cast<float*>(bytes);
  cp_async16(dst, src, true);
  cp_async_commit();
  seen[0] = dst[0];  // not landed yet: still the fresh block's NaN
  cp_async_wait<0>();
  seen[1] = dst[0];
}

TEST(SimtAsyncCopy, LandsAtItsWaitNotBefore) {
  alignas(16) float src[4] = {5, 6, 7, 8};
  float seen[2] = {0, 0};
  TESSEL_LAUNCH(copy_then_read, 1, 1, 64, nullptr)(seen, src);
  ASSERT_EQ(launch_error(), "");
  EXPECT_TRUE(std::isnan(seen[0]));
  EXPECT_EQ(seen[1], 5.0f);
}

// Warp 1 overwrites, by cp.async, rows that warp 0 reads by ldmatrix, with or without a barrier
// between.
__global__ void overwrite_while_read(const uint16_t* src, bool barrier) {
  TESSEL_DYNAMIC_SHARED(bytes);
  auto* tile = reinterpret_cast<uint16_t*>(bytes);
  const int lane = threadIdx.x % 32;
  if (threadIdx.x < 32) {
    uint32_t r[4];
    ldmatrix_x4(r, tile + lane * 8);
  }
  if (barrier) __syncthreads();
  if (threadIdx.x >= 32) cp_async16(tile + lane * 8, src + lane * 8, true);
  cp_async_commit();
  cp_async_wait<0>();
}

TEST(SimtRaceCheck, AWriteAfterAnotherWarpsReadNeedsABarrier) {
  alignas(16) static uint16_t src[32 * 8] = {};
  TESSEL_LAUNCH(overwrite_while_read, 1, 64, 32 * 16, nullptr)(src, true);
  EXPECT_EQ(launch_error(), "");
  TESSEL_LAUNCH(overwrite_while_read, 1, 64, 32 * 16, nullptr)(src, false);
  EXPECT_THAT(launch_error(), HasSubstr("shared-memory race: writes bytes that thread ("));
}

__global__ void misaligned_ldmatrix() {
  TESSEL_DYNAMIC_SHARED(bytes);
  uint32_t r[4];
  ldmatrix_x4(r, bytes + 8 + 16 * (threadIdx.x % 8));
}

TEST(SimtRaceCheck, AnLdmatrixRowOffASixteenByteBoundaryIsAFault) {
  TESSEL_LAUNCH(misaligned_ldmatrix, 1, 32, 256, nullptr)();
  EXPECT_THAT(launch_error(), HasSubstr("ldmatrix row address off a 16-byte boundary"));
}

}  // namespace
