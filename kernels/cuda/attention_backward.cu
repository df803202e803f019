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

// Row terms of the softmax backward are kept per (batch, head) for T rounded up to this, so that
// a tile of queries past T reads padding (lse +inf, delta 0: p = 0 there) instead of the next
// head's values.
constexpr int kRowTermPad = 64;

// The backward's tiles: kWarps warps of 16 * kM keys each (the block's key tile), walking query
// tiles of kQTile. More keys per warp let each Q and dout fragment loaded from shared memory feed
// more products; the registers for dk, dv, s and dp bound kM * kQTile.
template <int HS, int kWarps_, int kM_, int kQTile_, int kMinBlocks_ = 1>
struct BackwardTiles {
  static constexpr int kMinBlocks = kMinBlocks_;  // per multiprocessor: caps the registers
  static constexpr int kWarps = kWarps_;
  static constexpr int kM = kM_;
  static constexpr int kQTile = kQTile_;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kWarpKeys = 16 * kM;
  static constexpr int kKeyTile = kWarps * kWarpKeys;
  static constexpr int kStride = kTileStride<HS>;
  static constexpr int kSStride = kQTile + 8;  // rows of ds^T in shared memory, padded
  // dq of a query tile: the warps split its queries in groups of 16 and the head dimension.
  static constexpr int kQueryGroups = kQTile / 16;
  static constexpr int kDSpan = HS * kQueryGroups / kWarps;
  static_assert(kWarps % kQueryGroups == 0 && kDSpan % 16 == 0, "dq's split over the warps");
  static_assert(kKeyTile % kQTile == 0 && kRowTermPad % kQTile == 0, "query tiles align");
  // K and V once, Q and dout twice (double buffered), ds^T, then lse and delta twice.
  static constexpr size_t kBf16Elements =
      size_t(2 * kKeyTile + 4 * kQTile) * kStride + size_t(kKeyTile) * kSStride;
  static constexpr size_t kSharedBytes =
      kBf16Elements * sizeof(__nv_bfloat16) + 4 * kQTile * sizeof(float);
  static_assert(kBf16Elements * sizeof(__nv_bfloat16) % 16 == 0, "row terms 16-byte aligned");
};

// The tiles taken, the fastest of those timed on an H100 (docs/benchmarks.md): for heads of 64,
// 4 warps of 16 keys over query tiles of 64 with the registers capped at 168 for 3 blocks per
// multiprocessor (8 warps, 32 keys a warp, or no cap were 5-27% slower); for heads of 128, query
// tiles of 32 (8 warps were no faster).
using Heads64Tiles = BackwardTiles<64, 4, 1, 64, 3>;
using Heads128Tiles = BackwardTiles<128, 4, 1, 32>;

// lse2[b, h, t] = lse * log2(e) and delta[b, h, t] = sum_d dout[b, t, h, d] out[b, t, h, d] (the
// softmax backward's row term: sum_j p_j dp_j equals dout . out), for t < T_pad, padded past T
// with +inf and 0; and dq[b, t, h, :] = 0, for the backward's atomics. One thread per (b, t, h).
template <int HS>
__global__ void attention_row_terms_kernel(float* lse2, float* delta, float* dq, const float* lse,
                                           const __nv_bfloat16* dout, const __nv_bfloat16* out,
                                           int B, int T, int T_pad, int C, int NH) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(B) * T_pad * NH) return;
  const int h = int(idx % NH);
  const int64_t bt = idx / NH;
  const int b = int(bt / T_pad);
  const int t = int(bt % T_pad);
  const int64_t at = (int64_t(b) * NH + h) * T_pad + t;
  if (t >= T) {
    lse2[at] = INFINITY;
    delta[at] = 0.0f;
    return;
  }
  const int64_t offset = (int64_t(b) * T + t) * C + h * HS;
#pragma unroll
  for (int d = 0; d < HS; d += 4) *reinterpret_cast<float4*>(dq + offset + d) = float4{};
  float sum = 0.0f;
#pragma unroll
  for (int d = 0; d < HS; d += 8) {
    float x[8], y[8];
    load8(dout + offset + d, x);
    load8(out + offset + d, y);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += x[j] * y[j];
  }
  lse2[at] = lse[(int64_t(b) * NH + h) * T + t] * kLog2e;
  delta[at] = sum;
}

// Queues cp.async copies of the row terms of queries [q0, q0 + kQTile) into shared memory.
template <int kQTile, int kThreads>
__device__ __forceinline__ void load_row_terms(float* lse2_tile, float* delta_tile,
                                               const float* lse2_head, const float* delta_head,
                                               int q0) {
  constexpr int kChunks = kQTile / 4;  // 16-byte chunks of each
  for (int i = threadIdx.x; i < 2 * kChunks; i += kThreads) {
    const bool is_lse = i < kChunks;
    const int chunk = is_lse ? i : i - kChunks;
    cp_async16((is_lse ? lse2_tile : delta_tile) + chunk * 4,
               (is_lse ? lse2_head : delta_head) + q0 + chunk * 4, true);
  }
}

// One block per (tile of keys, batch x head), kWarps warps of 16 * kM keys. The block walks the
// query tiles from its diagonal to the end, Q, dout and their row terms double buffered through
// shared memory, and per tile recomputes p^T = exp(k q^T scale - lse) (keys x queries), then
//   dp^T = v dout^T,  ds^T = p^T (dp^T - delta),  dv += p^T dout,  dk += ds^T q,
//   dq += ds k  (ds^T goes through shared memory; atomics into the fp32 dq of all key tiles).
// A warp whose keys all lie after the tile's queries skips it. dk and dv stay in registers until
// the end, when the block adds them into dinp. Thread (g = lane / 4, t = lane % 4) holds keys g
// and g + 8 of each of its warp's row tiles.
template <int HS, class Tiles>
__global__ void __launch_bounds__(Tiles::kThreads, Tiles::kMinBlocks)
    attention_backward_kernel(__nv_bfloat16* dinp, float* dq, const __nv_bfloat16* dout,
                              const __nv_bfloat16* inp, const float* lse2, const float* delta,
                              int T, int T_pad, int C, int NH, float scale, float scale_log2) {
  constexpr int kM = Tiles::kM;
  constexpr int kQTile = Tiles::kQTile;
  constexpr int kThreads = Tiles::kThreads;
  constexpr int kWarpKeys = Tiles::kWarpKeys;
  constexpr int kKeyTile = Tiles::kKeyTile;
  constexpr int kStride = Tiles::kStride;
  constexpr int kSStride = Tiles::kSStride;
  constexpr int kDSpan = Tiles::kDSpan;
  constexpr int kDSteps = HS / 16;
  TESSEL_DYNAMIC_SHARED(shared_bytes);
  auto* k_tile = reinterpret_cast<__nv_bfloat16*>(shared_bytes);
  __nv_bfloat16* v_tile = k_tile + kKeyTile * kStride;
  constexpr int kQElements = kQTile * kStride;
  __nv_bfloat16* q_tiles = v_tile + kKeyTile * kStride;  // buffer i at + i * kQElements
  __nv_bfloat16* dout_tiles = q_tiles + 2 * kQElements;
  __nv_bfloat16* ds_tile = dout_tiles + 2 * kQElements;  // (kKeyTile keys, kQTile queries)
  auto* lse2_tiles = reinterpret_cast<float*>(ds_tile + kKeyTile * kSStride);  // + i * kQTile
  float* delta_tiles = lse2_tiles + 2 * kQTile;

  const int key_tile = blockIdx.x;
  const int b = blockIdx.y / NH;
  const int h = blockIdx.y % NH;
  const int k0 = key_tile * kKeyTile;
  const int64_t row_stride = 3 * int64_t(C);
  const __nv_bfloat16* q_head = inp + int64_t(b) * T * row_stride + h * HS;
  const __nv_bfloat16* k_head = q_head + C;
  const __nv_bfloat16* v_head = q_head + 2 * C;
  const __nv_bfloat16* dout_head = dout + int64_t(b) * T * C + h * HS;
  const float* lse2_head = lse2 + (int64_t(b) * NH + h) * T_pad;
  const float* delta_head = delta + (int64_t(b) * NH + h) * T_pad;
  float* dq_head = dq + int64_t(b) * T * C + h * HS;

  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int mi = lane / 8;
  const int warp_key0 = k0 + warp * kWarpKeys;

  const int first_query_tile = k0 / kQTile;  // k0 is a multiple of kQTile
  const int query_tiles = int(ceil_div(T, kQTile));
  load_tile<kKeyTile, HS, kThreads>(k_tile, k_head, row_stride, k0, T);
  load_tile<kKeyTile, HS, kThreads>(v_tile, v_head, row_stride, k0, T);
  load_tile<kQTile, HS, kThreads>(q_tiles, q_head, row_stride, first_query_tile * kQTile, T);
  load_tile<kQTile, HS, kThreads>(dout_tiles, dout_head, C, first_query_tile * kQTile, T);
  load_row_terms<kQTile, kThreads>(lse2_tiles, delta_tiles, lse2_head, delta_head,
                                   first_query_tile * kQTile);
  cp_async_commit();

  float dk[kM][HS / 8][4] = {};
  float dv[kM][HS / 8][4] = {};

  for (int i = first_query_tile; i < query_tiles; ++i) {
    const int buffer = (i - first_query_tile) & 1;
    if (i + 1 < query_tiles) {
      const int next = buffer ^ 1;
      load_tile<kQTile, HS, kThreads>(q_tiles + next * kQElements, q_head, row_stride,
                                      (i + 1) * kQTile, T);
      load_tile<kQTile, HS, kThreads>(dout_tiles + next * kQElements, dout_head, C,
                                      (i + 1) * kQTile, T);
      load_row_terms<kQTile, kThreads>(lse2_tiles + next * kQTile, delta_tiles + next * kQTile,
                                       lse2_head, delta_head, (i + 1) * kQTile);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const __nv_bfloat16* q_tile = q_tiles + buffer * kQElements;
    const __nv_bfloat16* dout_tile = dout_tiles + buffer * kQElements;
    const float* lse2_tile = lse2_tiles + buffer * kQTile;
    const float* delta_tile = delta_tiles + buffer * kQTile;
    const int q0 = i * kQTile;

    // Warp-uniform: a warp whose keys all come after the tile's last query has nothing to add
    // (and phase 3 below does not read its rows of ds^T); one whose last key is after the tile's
    // first query needs the causal mask.
    if (warp_key0 <= q0 + kQTile - 1) {
      const bool masked = warp_key0 + kWarpKeys - 1 > q0;
      // s^T = k q^T and dp^T = v dout^T: 16 * kM keys x kQTile queries per warp.
      float s[kM][kQTile / 8][4] = {};
      float dp[kM][kQTile / 8][4] = {};
#pragma unroll
      for (int dk_step = 0; dk_step < kDSteps; ++dk_step) {
        uint32_t ka[kM][4], va[kM][4];
#pragma unroll
        for (int r = 0; r < kM; ++r) {
          const int key_row = warp * kWarpKeys + r * 16 + (mi & 1) * 8 + lane % 8;
          const int a_chunk = 2 * dk_step + (mi >> 1);
          ldmatrix_x4(ka[r], k_tile + key_row * kStride + a_chunk * 8);
          ldmatrix_x4(va[r], v_tile + key_row * kStride + a_chunk * 8);
        }
#pragma unroll
        for (int np = 0; np < kQTile / 16; ++np) {
          uint32_t qb[4], ob[4];
          const int query_row = np * 16 + (mi >> 1) * 8 + lane % 8;
          const int b_chunk = 2 * dk_step + (mi & 1);
          ldmatrix_x4(qb, q_tile + query_row * kStride + b_chunk * 8);
          ldmatrix_x4(ob, dout_tile + query_row * kStride + b_chunk * 8);
#pragma unroll
          for (int r = 0; r < kM; ++r) {
            mma_bf16(s[r][2 * np], ka[r], qb[0], qb[1]);
            mma_bf16(s[r][2 * np + 1], ka[r], qb[2], qb[3]);
            mma_bf16(dp[r][2 * np], va[r], ob[0], ob[1]);
            mma_bf16(dp[r][2 * np + 1], va[r], ob[2], ob[3]);
          }
        }
      }

      // Keys after the query are masked (their p comes out 0).
      if (masked) {
#pragma unroll
        for (int r = 0; r < kM; ++r) {
#pragma unroll
          for (int nt = 0; nt < kQTile / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = warp_key0 + r * 16 + g + (e < 2 ? 0 : 8);
              if (key > q0 + nt * 8 + 2 * t + (e & 1)) s[r][nt][e] = -INFINITY;
            }
          }
        }
      }
      // p^T = exp2(s scale log2e - lse log2e) (a query past T has lse +inf, so p = 0 there); then
      // ds^T = p^T (dp^T - delta) in place of dp.
#pragma unroll
      for (int nt = 0; nt < kQTile / 8; ++nt) {
        const float2 row_lse2 = load_shared_f32x2(lse2_tile + nt * 8 + 2 * t);
        const float2 row_delta = load_shared_f32x2(delta_tile + nt * 8 + 2 * t);
#pragma unroll
        for (int r = 0; r < kM; ++r) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int c = e & 1;
            const float p =
                exp2f(fmaf(s[r][nt][e], scale_log2, -(c == 0 ? row_lse2.x : row_lse2.y)));
            s[r][nt][e] = p;
            dp[r][nt][e] = p * (dp[r][nt][e] - (c == 0 ? row_delta.x : row_delta.y));
          }
        }
      }

      // dv += p^T dout and dk += ds^T q: A from registers (keys x queries), B = dout or q
      // (queries x HS, row major) through ldmatrix.trans.
#pragma unroll
      for (int kk = 0; kk < kQTile / 16; ++kk) {
        uint32_t pa[kM][4], dsa[kM][4];
#pragma unroll
        for (int r = 0; r < kM; ++r) {
          a_fragment_of(pa[r], s[r][2 * kk], s[r][2 * kk + 1]);
          a_fragment_of(dsa[r], dp[r][2 * kk], dp[r][2 * kk + 1]);
        }
#pragma unroll
        for (int d_pair = 0; d_pair < HS / 16; ++d_pair) {
          uint32_t ob[4], qb[4];
          const int query_row = kk * 16 + (mi & 1) * 8 + lane % 8;
          const int chunk = 2 * d_pair + (mi >> 1);
          ldmatrix_x4_trans(ob, dout_tile + query_row * kStride + chunk * 8);
          ldmatrix_x4_trans(qb, q_tile + query_row * kStride + chunk * 8);
#pragma unroll
          for (int r = 0; r < kM; ++r) {
            mma_bf16(dv[r][2 * d_pair], pa[r], ob[0], ob[1]);
            mma_bf16(dv[r][2 * d_pair + 1], pa[r], ob[2], ob[3]);
            mma_bf16(dk[r][2 * d_pair], dsa[r], qb[0], qb[1]);
            mma_bf16(dk[r][2 * d_pair + 1], dsa[r], qb[2], qb[3]);
          }
        }
      }

      // ds^T to shared memory, so that each warp can take a slice of dq over all the keys.
#pragma unroll
      for (int r = 0; r < kM; ++r) {
        const int row = warp * kWarpKeys + r * 16 + g;
#pragma unroll
        for (int nt = 0; nt < kQTile / 8; ++nt) {
          const int column = nt * 8 + 2 * t;
          store_shared_b32(ds_tile + row * kSStride + column,
                           pack_bf16(dp[r][nt][0], dp[r][nt][1]));
          store_shared_b32(ds_tile + (row + 8) * kSStride + column,
                           pack_bf16(dp[r][nt][2], dp[r][nt][3]));
        }
      }
    }
    __syncthreads();  // ds^T complete; every warp is also done with this Q/dout buffer

    // dq[queries of group qg, dimensions of span dg] += scale * ds k: A = ds (queries x keys)
    // from ds^T by ldmatrix.trans, B = k (keys x HS) by ldmatrix.trans. Keys past the tile's last
    // query (the rows of warps that skipped it) add nothing and are not read.
    const int qg = warp % Tiles::kQueryGroups;
    const int dg = warp / Tiles::kQueryGroups;
    const int key_steps = (q0 + kQTile - k0) / 16;  // q0 + kQTile - k0 is a multiple of 16
    float acc[kDSpan / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      if (kk >= key_steps) break;
      uint32_t ds_frag[4];
      const int ds_row = kk * 16 + (mi >> 1) * 8 + lane % 8;
      ldmatrix_x4_trans(ds_frag, ds_tile + ds_row * kSStride + (2 * qg + (mi & 1)) * 8);
#pragma unroll
      for (int d_pair = 0; d_pair < kDSpan / 16; ++d_pair) {
        uint32_t kb[4];
        const int key_row = kk * 16 + (mi & 1) * 8 + lane % 8;
        const int chunk = dg * (kDSpan / 8) + 2 * d_pair + (mi >> 1);
        ldmatrix_x4_trans(kb, k_tile + key_row * kStride + chunk * 8);
        mma_bf16(acc[2 * d_pair], ds_frag, kb[0], kb[1]);
        mma_bf16(acc[2 * d_pair + 1], ds_frag, kb[2], kb[3]);
      }
    }
    const int query_lo = q0 + qg * 16 + g;
#pragma unroll
    for (int n = 0; n < kDSpan / 8; ++n) {
      const int d = dg * kDSpan + n * 8 + 2 * t;
      if (query_lo < T) {
        atomic_add_f32x2(dq_head + int64_t(query_lo) * C + d, acc[n][0] * scale, acc[n][1] * scale);
      }
      if (query_lo + 8 < T) {
        atomic_add_f32x2(dq_head + int64_t(query_lo + 8) * C + d, acc[n][2] * scale,
                         acc[n][3] * scale);
      }
    }
  }

  // dinp's k and v columns of this block's keys += dk * scale, dv (no other block writes them).
  __nv_bfloat16* dk_head = dinp + int64_t(b) * T * row_stride + C + h * HS;
  __nv_bfloat16* dv_head = dk_head + C;
#pragma unroll
  for (int r = 0; r < kM; ++r) {
#pragma unroll
    for (int nd = 0; nd < HS / 8; ++nd) {
      const int d = nd * 8 + 2 * t;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int key = warp_key0 + r * 16 + g + 8 * half;
        if (key >= T) continue;
        auto* dk_pair = reinterpret_cast<__nv_bfloat162*>(dk_head + int64_t(key) * row_stride + d);
        auto* dv_pair = reinterpret_cast<__nv_bfloat162*>(dv_head + int64_t(key) * row_stride + d);
        const float2 dk_old = __bfloat1622float2(*dk_pair);
        const float2 dv_old = __bfloat1622float2(*dv_pair);
        *dk_pair = __floats2bfloat162_rn(dk_old.x + dk[r][nd][2 * half] * scale,
                                         dk_old.y + dk[r][nd][2 * half + 1] * scale);
        *dv_pair = __floats2bfloat162_rn(dv_old.x + dv[r][nd][2 * half],
                                         dv_old.y + dv[r][nd][2 * half + 1]);
      }
    }
  }
}

// dinp[b, t, 0:C] (the q columns) += dq[b, t, :], 8 channels per thread.
__global__ void add_dq_kernel(__nv_bfloat16* dinp, const float* dq, int64_t BT, int C) {
  const int chunks = C / 8;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= BT * chunks) return;
  const int64_t bt = idx / chunks;
  const int c = int(idx % chunks) * 8;
  float acc[8], d[8];
  load8(dinp + bt * 3 * C + c, acc);
  load8(dq + bt * C + c, 8, true, d);
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j] += d[j];
  store8(dinp + bt * 3 * C + c, acc);
}

template <int HS, class Tiles>
void launch_backward(bf16* dinp, const bf16* dout, const bf16* inp, const bf16* out,
                     const float* lse, int B, int T, int C, int NH, Context& ctx) {
  const cudaStream_t stream = ctx.stream();
  const int64_t BT = int64_t(B) * T;
  const int T_pad = int(ceil_div(T, kRowTermPad) * kRowTermPad);
  const size_t dq_bytes = (size_t(BT) * C * sizeof(float) + 255) / 256 * 256;
  const size_t row_terms = size_t(B) * NH * T_pad;
  auto* scratch = static_cast<char*>(ctx.scratch(dq_bytes + 2 * row_terms * sizeof(float)));
  auto* dq = reinterpret_cast<float*>(scratch);
  auto* lse2 = reinterpret_cast<float*>(scratch + dq_bytes);
  float* delta = lse2 + row_terms;

  TESSEL_LAUNCH(attention_row_terms_kernel<HS>, unsigned(ceil_div(int64_t(row_terms), 256)), 256, 0,
                stream)
  (lse2, delta, dq, lse, dout, out, B, T, T_pad, C, NH);
  TESSEL_CUDA_CHECK_LAUNCH("attention_row_terms_kernel");

  constexpr size_t kShared = Tiles::kSharedBytes;
  constexpr auto backward_kernel = attention_backward_kernel<HS, Tiles>;
  TESSEL_CUDA_CHECK(cudaFuncSetAttribute(
      backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kShared)));
  const dim3 grid(unsigned(ceil_div(T, Tiles::kKeyTile)), unsigned(B * NH));
  const float scale = 1.0f / std::sqrt(float(HS));
  TESSEL_LAUNCH(backward_kernel, grid, Tiles::kThreads, kShared, stream)
  (dinp, dq, dout, inp, lse2, delta, T, T_pad, C, NH, scale, scale * kLog2e);
  TESSEL_CUDA_CHECK_LAUNCH("attention_backward_kernel");

  TESSEL_LAUNCH(add_dq_kernel, unsigned(ceil_div(BT * (C / 8), 256)), 256, 0, stream)
  (dinp, dq, BT, C);
  TESSEL_CUDA_CHECK_LAUNCH("add_dq_kernel");
}

}  // namespace

void attention_backward(bf16* dinp, const bf16* dout, const bf16* inp, const bf16* out,
                        const float* lse, int B, int T, int C, int NH, Context& ctx) {
  constexpr const char* kOp = "attention_backward";
  checks::require_pointer(dinp, kOp, "dinp");
  checks::require_pointer(dout, kOp, "dout");
  checks::require_pointer(inp, kOp, "inp");
  checks::require_pointer(out, kOp, "out");
  checks::require_pointer(lse, kOp, "lse");
  const int HS = attention_head_size(kOp, B, T, C, NH);
  require_aligned16(dinp, kOp, "dinp");
  require_aligned16(dout, kOp, "dout");
  require_aligned16(inp, kOp, "inp");
  require_aligned16(out, kOp, "out");
  if (HS == 64) {
    launch_backward<64, Heads64Tiles>(dinp, dout, inp, out, lse, B, T, C, NH, ctx);
  } else {
    launch_backward<128, Heads128Tiles>(dinp, dout, inp, out, lse, B, T, C, NH, ctx);
  }
}

}  // namespace tessel::kernels::cuda
