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

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kKeyTile = 64;

// Row tiles of 16 queries per warp: two for heads of 64, so that each K and V fragment loaded
// from shared memory feeds twice the products (the loads, not the tensor cores, bound one);
// one for heads of 128, whose output accumulator would not fit twice in registers.
template <int HS>
constexpr int kRowTiles = HS == 64 ? 2 : 1;
template <int kM>
constexpr int kQueryTile = kWarps * 16 * kM;

template <int HS, int kM>
constexpr size_t forward_shared_bytes() {
  // Q, then K and V twice (double buffered).
  return size_t(kQueryTile<kM> + 4 * kKeyTile) * kTileStride<HS> * sizeof(__nv_bfloat16);
}

// One block per (tile of queries, batch x head), 4 warps of 16 * kRowTiles query rows. Key/value
// tiles stream through shared memory, the next one loading (cp.async) while the current one is
// used. Each warp keeps its queries' fragments, the output accumulator (fp32) and the online
// softmax state (running max m in the log2 domain, and sum l, per row) in registers, and skips a
// key tile that lies wholly after its rows. Thread (g = lane / 4, t = lane % 4) holds rows g and
// g + 8 of each of its warp's row tiles.
template <int HS, int kM>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(__nv_bfloat16* out, float* lse, const __nv_bfloat16* inp, int T, int C,
                             int NH, float scale_log2) {
  constexpr int kStride = kTileStride<HS>;
  constexpr int kDSteps = HS / 16;  // k-steps over the head dimension
  constexpr int kQTile = kQueryTile<kM>;
  constexpr int kWarpRows = 16 * kM;
  TESSEL_DYNAMIC_SHARED(shared_bytes);
  auto* q_tile = reinterpret_cast<__nv_bfloat16*>(shared_bytes);
  // Buffer i of K at k_tiles + i * kTileElements, of V at v_tiles + i * kTileElements.
  constexpr int kTileElements = kKeyTile * kStride;
  __nv_bfloat16* k_tiles = q_tile + kQTile * kStride;
  __nv_bfloat16* v_tiles = k_tiles + 2 * kTileElements;

  // The last query tiles have the most key tiles: start them first.
  const int query_tile = int(gridDim.x) - 1 - int(blockIdx.x);
  const int b = blockIdx.y / NH;
  const int h = blockIdx.y % NH;
  const int q0 = query_tile * kQTile;
  const int64_t row_stride = 3 * int64_t(C);
  const __nv_bfloat16* q_head = inp + int64_t(b) * T * row_stride + h * HS;
  const __nv_bfloat16* k_head = q_head + C;
  const __nv_bfloat16* v_head = q_head + 2 * C;

  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int mi = lane / 8;  // which of ldmatrix.x4's matrices this lane addresses
  const int warp_row0 = q0 + warp * kWarpRows;

  load_tile<kQTile, HS, kThreads>(q_tile, q_head, row_stride, q0, T);
  load_tile<kKeyTile, HS, kThreads>(k_tiles, k_head, row_stride, 0, T);
  load_tile<kKeyTile, HS, kThreads>(v_tiles, v_head, row_stride, 0, T);
  cp_async_commit();

  uint32_t q_frag[kM][kDSteps][4];
  float o[kM][HS / 8][4] = {};
  // Per row tile, [0] for row g and [1] for row g + 8: the running max of the scaled scores (log2
  // domain) and this thread's part of the running sum.
  float m[kM][2], l[kM][2];
#pragma unroll
  for (int r = 0; r < kM; ++r) {
    m[r][0] = m[r][1] = -INFINITY;
    l[r][0] = l[r][1] = 0.0f;
  }

  // Keys up to the tile's last query (or T - 1).
  const int key_tiles = int(ceil_div(min(q0 + kQTile, T), kKeyTile));
  for (int j = 0; j < key_tiles; ++j) {
    if (j + 1 < key_tiles) {
      load_tile<kKeyTile, HS, kThreads>(k_tiles + ((j + 1) & 1) * kTileElements, k_head, row_stride,
                                        (j + 1) * kKeyTile, T);
      load_tile<kKeyTile, HS, kThreads>(v_tiles + ((j + 1) & 1) * kTileElements, v_head, row_stride,
                                        (j + 1) * kKeyTile, T);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int r = 0; r < kM; ++r) {
#pragma unroll
        for (int dk = 0; dk < kDSteps; ++dk) {
          const int row = warp * kWarpRows + r * 16 + (mi & 1) * 8 + lane % 8;
          ldmatrix_x4(q_frag[r][dk], q_tile + row * kStride + (2 * dk + (mi >> 1)) * 8);
        }
      }
    }
    const int k0 = j * kKeyTile;
    // Warp-uniform: a tile wholly after the warp's rows adds nothing to them; one that reaches
    // past its first row needs the causal mask.
    if (k0 <= warp_row0 + kWarpRows - 1) {
      const bool masked = k0 + kKeyTile - 1 > warp_row0;
      const __nv_bfloat16* k_tile = k_tiles + (j & 1) * kTileElements;
      const __nv_bfloat16* v_tile = v_tiles + (j & 1) * kTileElements;

      // s = q k^T for the warp's rows and the tile's 64 keys (8 tiles of 8 keys).
      float s[kM][kKeyTile / 8][4] = {};
#pragma unroll
      for (int dk = 0; dk < kDSteps; ++dk) {
#pragma unroll
        for (int np = 0; np < kKeyTile / 16; ++np) {
          uint32_t kb[4];
          const int key = np * 16 + (mi >> 1) * 8 + lane % 8;
          ldmatrix_x4(kb, k_tile + key * kStride + (2 * dk + (mi & 1)) * 8);
#pragma unroll
          for (int r = 0; r < kM; ++r) {
            mma_bf16(s[r][2 * np], q_frag[r][dk], kb[0], kb[1]);
            mma_bf16(s[r][2 * np + 1], q_frag[r][dk], kb[2], kb[3]);
          }
        }
      }

#pragma unroll
      for (int r = 0; r < kM; ++r) {
        const int row_lo = warp_row0 + r * 16 + g;
        // Keys after the query are masked; the max is taken over the unscaled scores (the scale
        // is positive) and the scale folded into the exponent.
        if (masked) {
#pragma unroll
          for (int nt = 0; nt < kKeyTile / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = k0 + nt * 8 + 2 * t + (e & 1);
              if (key > (e < 2 ? row_lo : row_lo + 8)) s[r][nt][e] = -INFINITY;
            }
          }
        }
        float max_lo = -INFINITY, max_hi = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kKeyTile / 8; ++nt) {
          max_lo = fmaxf(max_lo, fmaxf(s[r][nt][0], s[r][nt][1]));
          max_hi = fmaxf(max_hi, fmaxf(s[r][nt][2], s[r][nt][3]));
        }
        // The four threads of a row (lanes 4g..4g+3) share its max.
        max_lo = fmaxf(max_lo, __shfl_xor_sync(kFullMask, max_lo, 1));
        max_lo = fmaxf(max_lo, __shfl_xor_sync(kFullMask, max_lo, 2));
        max_hi = fmaxf(max_hi, __shfl_xor_sync(kFullMask, max_hi, 1));
        max_hi = fmaxf(max_hi, __shfl_xor_sync(kFullMask, max_hi, 2));
        // Every row has a key at or before it in tile 0, so the running max is finite from
        // there on (a row whose keys in this tile are all masked keeps its max).
        const float new_m_lo = fmaxf(m[r][0], max_lo * scale_log2);
        const float new_m_hi = fmaxf(m[r][1], max_hi * scale_log2);
        const float correction_lo = exp2f(m[r][0] - new_m_lo);  // 0 on the first tile
        const float correction_hi = exp2f(m[r][1] - new_m_hi);
        m[r][0] = new_m_lo;
        m[r][1] = new_m_hi;
        float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kKeyTile / 8; ++nt) {
          s[r][nt][0] = exp2f(fmaf(s[r][nt][0], scale_log2, -new_m_lo));
          s[r][nt][1] = exp2f(fmaf(s[r][nt][1], scale_log2, -new_m_lo));
          s[r][nt][2] = exp2f(fmaf(s[r][nt][2], scale_log2, -new_m_hi));
          s[r][nt][3] = exp2f(fmaf(s[r][nt][3], scale_log2, -new_m_hi));
          sum_lo += s[r][nt][0] + s[r][nt][1];
          sum_hi += s[r][nt][2] + s[r][nt][3];
        }
        l[r][0] = l[r][0] * correction_lo + sum_lo;
        l[r][1] = l[r][1] * correction_hi + sum_hi;
#pragma unroll
        for (int nd = 0; nd < HS / 8; ++nd) {
          o[r][nd][0] *= correction_lo;
          o[r][nd][1] *= correction_lo;
          o[r][nd][2] *= correction_hi;
          o[r][nd][3] *= correction_hi;
        }
      }

      // o += p v: p's accumulator layout is the A fragment layout, 16 keys per k-step.
#pragma unroll
      for (int kk = 0; kk < kKeyTile / 16; ++kk) {
        uint32_t pa[kM][4];
#pragma unroll
        for (int r = 0; r < kM; ++r) a_fragment_of(pa[r], s[r][2 * kk], s[r][2 * kk + 1]);
#pragma unroll
        for (int dp = 0; dp < HS / 16; ++dp) {
          uint32_t vb[4];
          const int key = kk * 16 + (mi & 1) * 8 + lane % 8;
          ldmatrix_x4_trans(vb, v_tile + key * kStride + (2 * dp + (mi >> 1)) * 8);
#pragma unroll
          for (int r = 0; r < kM; ++r) {
            mma_bf16(o[r][2 * dp], pa[r], vb[0], vb[1]);
            mma_bf16(o[r][2 * dp + 1], pa[r], vb[2], vb[3]);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }

  __nv_bfloat16* out_head = out + int64_t(b) * T * C + h * HS;
  float* lse_head = lse + (int64_t(b) * NH + h) * T;
#pragma unroll
  for (int r = 0; r < kM; ++r) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = l[r][half];
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      const int row = warp_row0 + r * 16 + g + 8 * half;
      if (row >= T) continue;
      const float inv = 1.0f / sum;
#pragma unroll
      for (int nd = 0; nd < HS / 8; ++nd) {
        *reinterpret_cast<__nv_bfloat162*>(out_head + int64_t(row) * C + nd * 8 + 2 * t) =
            __floats2bfloat162_rn(o[r][nd][2 * half] * inv, o[r][nd][2 * half + 1] * inv);
      }
      // ln(sum exp(score)) = ln(2^m l) = (m + log2 l) ln 2
      if (t == 0) lse_head[row] = (m[r][half] + __log2f(sum)) * 0.6931471805599453f;
    }
  }
}

template <int HS, int kM = kRowTiles<HS>>
void launch_forward(bf16* out, float* lse, const bf16* inp, int B, int T, int C, int NH,
                    Context& ctx) {
  constexpr size_t kShared = forward_shared_bytes<HS, kM>();
  constexpr auto forward_kernel = attention_forward_kernel<HS, kM>;
  TESSEL_CUDA_CHECK(cudaFuncSetAttribute(
      forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kShared)));
  const dim3 grid(unsigned(ceil_div(T, kQueryTile<kM>)), unsigned(B * NH));
  const float scale_log2 = kLog2e / std::sqrt(float(HS));
  TESSEL_LAUNCH(forward_kernel, grid, kThreads, kShared, ctx.stream())
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
