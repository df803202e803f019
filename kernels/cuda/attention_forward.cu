#include <cmath>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.cuh"

namespace tessel::kernels::cuda {
namespace {

using namespace detail;
namespace checks = cpu::detail;

constexpr int kQueryTile = 64;  // 16 query rows per warp
constexpr int kKeyTile = 64;    // equal to kQueryTile: the last key tile is the diagonal one

template <int HS>
constexpr size_t forward_shared_bytes() {
  // Q, then K and V twice (double buffered).
  return size_t(kQueryTile + 4 * kKeyTile) * kTileStride<HS> * sizeof(__nv_bfloat16);
}

// One block per (tile of 64 queries, batch x head), 4 warps of 16 query rows. Key/value tiles
// stream through shared memory, the next one loading (cp.async) while the current one is used.
// Each warp keeps its queries' fragments, the output accumulator (16 x HS, fp32) and the online
// softmax state (running max m and sum l per row, in the log2 domain) in registers.
// Thread (g = lane / 4, t = lane % 4) holds rows g and g + 8 of its warp's 16.
template <int HS>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_forward_kernel(__nv_bfloat16* out, float* lse, const __nv_bfloat16* inp, int T, int C,
                             int NH, float scale_log2) {
  constexpr int kStride = kTileStride<HS>;
  constexpr int kDSteps = HS / 16;  // k-steps over the head dimension
  TESSEL_DYNAMIC_SHARED(shared_bytes);
  auto* q_tile = reinterpret_cast<__nv_bfloat16*>(shared_bytes);
  // Buffer i of K at k_tiles + i * kTileElements, of V at v_tiles + i * kTileElements.
  constexpr int kTileElements = kKeyTile * kStride;
  __nv_bfloat16* k_tiles = q_tile + kQueryTile * kStride;
  __nv_bfloat16* v_tiles = k_tiles + 2 * kTileElements;

  // The last query tiles have the most key tiles: start them first.
  const int query_tile = int(gridDim.x) - 1 - int(blockIdx.x);
  const int b = blockIdx.y / NH;
  const int h = blockIdx.y % NH;
  const int q0 = query_tile * kQueryTile;
  const int64_t row_stride = 3 * int64_t(C);
  const __nv_bfloat16* q_head = inp + int64_t(b) * T * row_stride + h * HS;
  const __nv_bfloat16* k_head = q_head + C;
  const __nv_bfloat16* v_head = q_head + 2 * C;

  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int mi = lane / 8;  // which of ldmatrix.x4's matrices this lane addresses
  const int row_lo = q0 + warp * 16 + g;
  const int row_hi = row_lo + 8;

  load_tile<kQueryTile, HS>(q_tile, q_head, row_stride, q0, T);
  load_tile<kKeyTile, HS>(k_tiles, k_head, row_stride, 0, T);
  load_tile<kKeyTile, HS>(v_tiles, v_head, row_stride, 0, T);
  cp_async_commit();

  uint32_t q_frag[kDSteps][4];
  float o[HS / 8][4] = {};
  float m_lo = -INFINITY, m_hi = -INFINITY;  // running max of the scaled scores (log2 domain)
  float l_lo = 0.0f, l_hi = 0.0f;            // this thread's part of the running sums

  const int key_tiles = query_tile + 1;
  for (int j = 0; j < key_tiles; ++j) {
    if (j + 1 < key_tiles) {
      load_tile<kKeyTile, HS>(k_tiles + ((j + 1) & 1) * kTileElements, k_head, row_stride,
                              (j + 1) * kKeyTile, T);
      load_tile<kKeyTile, HS>(v_tiles + ((j + 1) & 1) * kTileElements, v_head, row_stride,
                              (j + 1) * kKeyTile, T);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int dk = 0; dk < kDSteps; ++dk) {
        const int row = warp * 16 + (mi & 1) * 8 + lane % 8;
        ldmatrix_x4(q_frag[dk], q_tile + row * kStride + (2 * dk + (mi >> 1)) * 8);
      }
    }
    const __nv_bfloat16* k_tile = k_tiles + (j & 1) * kTileElements;
    const __nv_bfloat16* v_tile = v_tiles + (j & 1) * kTileElements;

    // s = q k^T for the warp's 16 rows and the tile's 64 keys (8 tiles of 8 keys).
    float s[kKeyTile / 8][4] = {};
#pragma unroll
    for (int dk = 0; dk < kDSteps; ++dk) {
#pragma unroll
      for (int np = 0; np < kKeyTile / 16; ++np) {
        uint32_t kb[4];
        const int key = np * 16 + (mi >> 1) * 8 + lane % 8;
        ldmatrix_x4(kb, k_tile + key * kStride + (2 * dk + (mi & 1)) * 8);
        mma_bf16(s[2 * np], q_frag[dk], kb[0], kb[1]);
        mma_bf16(s[2 * np + 1], q_frag[dk], kb[2], kb[3]);
      }
    }

    // Scale into the log2 domain; in the diagonal tile, keys after the query are masked.
    const int k0 = j * kKeyTile;
    const bool diagonal = j == key_tiles - 1;
    float max_lo = -INFINITY, max_hi = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kKeyTile / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + nt * 8 + 2 * t + (e & 1);
        const int row = e < 2 ? row_lo : row_hi;
        s[nt][e] = diagonal && key > row ? -INFINITY : s[nt][e] * scale_log2;
      }
      max_lo = fmaxf(max_lo, fmaxf(s[nt][0], s[nt][1]));
      max_hi = fmaxf(max_hi, fmaxf(s[nt][2], s[nt][3]));
    }
    // The four threads of a row (lanes 4g..4g+3) share its max.
    max_lo = fmaxf(max_lo, __shfl_xor_sync(kFullMask, max_lo, 1));
    max_lo = fmaxf(max_lo, __shfl_xor_sync(kFullMask, max_lo, 2));
    max_hi = fmaxf(max_hi, __shfl_xor_sync(kFullMask, max_hi, 1));
    max_hi = fmaxf(max_hi, __shfl_xor_sync(kFullMask, max_hi, 2));
    // Every row has a key at or before it in tile 0, so the new max is finite.
    const float new_m_lo = fmaxf(m_lo, max_lo);
    const float new_m_hi = fmaxf(m_hi, max_hi);
    const float correction_lo = exp2f(m_lo - new_m_lo);  // 0 on the first tile (m = -inf)
    const float correction_hi = exp2f(m_hi - new_m_hi);
    m_lo = new_m_lo;
    m_hi = new_m_hi;
    float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kKeyTile / 8; ++nt) {
      s[nt][0] = exp2f(s[nt][0] - m_lo);
      s[nt][1] = exp2f(s[nt][1] - m_lo);
      s[nt][2] = exp2f(s[nt][2] - m_hi);
      s[nt][3] = exp2f(s[nt][3] - m_hi);
      sum_lo += s[nt][0] + s[nt][1];
      sum_hi += s[nt][2] + s[nt][3];
    }
    l_lo = l_lo * correction_lo + sum_lo;
    l_hi = l_hi * correction_hi + sum_hi;
#pragma unroll
    for (int nd = 0; nd < HS / 8; ++nd) {
      o[nd][0] *= correction_lo;
      o[nd][1] *= correction_lo;
      o[nd][2] *= correction_hi;
      o[nd][3] *= correction_hi;
    }

    // o += p v: p's accumulator layout is the A fragment layout, 16 keys per k-step.
#pragma unroll
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      const uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                              pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < HS / 16; ++dp) {
        uint32_t vb[4];
        const int key = kk * 16 + (mi & 1) * 8 + lane % 8;
        ldmatrix_x4_trans(vb, v_tile + key * kStride + (2 * dp + (mi >> 1)) * 8);
        mma_bf16(o[2 * dp], pa, vb[0], vb[1]);
        mma_bf16(o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }

  l_lo += __shfl_xor_sync(kFullMask, l_lo, 1);
  l_lo += __shfl_xor_sync(kFullMask, l_lo, 2);
  l_hi += __shfl_xor_sync(kFullMask, l_hi, 1);
  l_hi += __shfl_xor_sync(kFullMask, l_hi, 2);
  const float inv_lo = 1.0f / l_lo;
  const float inv_hi = 1.0f / l_hi;
  __nv_bfloat16* out_head = out + int64_t(b) * T * C + h * HS;
#pragma unroll
  for (int nd = 0; nd < HS / 8; ++nd) {
    const int d = nd * 8 + 2 * t;
    if (row_lo < T) {
      *reinterpret_cast<__nv_bfloat162*>(out_head + int64_t(row_lo) * C + d) =
          __floats2bfloat162_rn(o[nd][0] * inv_lo, o[nd][1] * inv_lo);
    }
    if (row_hi < T) {
      *reinterpret_cast<__nv_bfloat162*>(out_head + int64_t(row_hi) * C + d) =
          __floats2bfloat162_rn(o[nd][2] * inv_hi, o[nd][3] * inv_hi);
    }
  }
  if (t == 0) {
    // ln(sum exp(score)) = ln(2^m l) = (m + log2 l) ln 2
    float* lse_head = lse + (int64_t(b) * NH + h) * T;
    if (row_lo < T) lse_head[row_lo] = (m_lo + __log2f(l_lo)) * 0.6931471805599453f;
    if (row_hi < T) lse_head[row_hi] = (m_hi + __log2f(l_hi)) * 0.6931471805599453f;
  }
}

template <int HS>
void launch_forward(bf16* out, float* lse, const bf16* inp, int B, int T, int C, int NH,
                    Context& ctx) {
  constexpr size_t kShared = forward_shared_bytes<HS>();
  TESSEL_CUDA_CHECK(cudaFuncSetAttribute(
      attention_forward_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kShared)));
  const dim3 grid(unsigned(ceil_div(T, kQueryTile)), unsigned(B * NH));
  const float scale_log2 = kLog2e / std::sqrt(float(HS));
  TESSEL_LAUNCH(attention_forward_kernel<HS>, grid, kAttentionThreads, kShared, ctx.stream())
  (out, lse, inp, T, C, NH, scale_log2);
  TESSEL_CUDA_CHECK_LAUNCH("attention_forward_kernel");
}

}  // namespace

void attention_forward(bf16* out, float* lse, const bf16* inp, int B, int T, int C, int NH,
                       Context& ctx) {
  constexpr const char* kOp = "attention_forward";
  checks::require_pointer(out, kOp, "out");
  checks::require_pointer(lse, kOp, "lse");
  checks::require_pointer(inp, kOp, "inp");
  const int HS = attention_head_size(kOp, B, T, C, NH);
  require_aligned16(out, kOp, "out");
  require_aligned16(inp, kOp, "inp");
  if (HS == 64) {
    launch_forward<64>(out, lse, inp, B, T, C, NH, ctx);
  } else {
    launch_forward<128>(out, lse, inp, B, T, C, NH, ctx);
  }
}

}  // namespace tessel::kernels::cuda
