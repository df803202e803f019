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

constexpr int kKeyTile = 64;  // 16 keys per warp

// Queries per step of the loop: fewer for HS = 128 to leave registers for dk and dv.
template <int HS>
constexpr int kQueryTile = HS == 128 ? 32 : 64;
template <int HS>
constexpr int kScoreStride = kQueryTile<HS> + 8;  // rows of ds^T in shared memory, padded

template <int HS>
constexpr size_t backward_shared_bytes() {
  // K and V once, Q and dout twice (double buffered), ds^T.
  return (size_t(2 * kKeyTile + 4 * kQueryTile<HS>) * kTileStride<HS> +
          size_t(kKeyTile) * kScoreStride<HS>)*sizeof(__nv_bfloat16);
}

// delta[b, h, t] = sum_d dout[b, t, h, d] out[b, t, h, d]: the softmax backward's row term
// (sum_j p_j dp_j equals dout . out). One thread per (b, t, h).
template <int HS>
__global__ void attention_delta_kernel(float* delta, const __nv_bfloat16* dout,
                                       const __nv_bfloat16* out, int B, int T, int C, int NH) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(B) * T * NH) return;
  const int h = int(idx % NH);
  const int64_t bt = idx / NH;
  const int64_t offset = bt * C + h * HS;
  float sum = 0.0f;
#pragma unroll
  for (int d = 0; d < HS; d += 8) {
    float a[8], b[8];
    load8(dout + offset + d, a);
    load8(out + offset + d, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += a[j] * b[j];
  }
  const int64_t b_index = bt / T;
  const int t = int(bt % T);
  delta[(b_index * NH + h) * T + t] = sum;
}

// One block per (tile of 64 keys, batch x head), 4 warps of 16 keys. The block walks the query
// tiles from its diagonal to the end, Q and dout double buffered through shared memory, and per
// tile recomputes p^T = exp(k q^T scale - lse) (keys x queries), then
//   dp^T = v dout^T,  ds^T = p^T (dp^T - delta),  dv += p^T dout,  dk += ds^T q,
//   dq += ds k  (ds^T goes through shared memory; atomics into the fp32 dq of all key tiles).
// dk and dv stay in registers until the end, when the block adds them into dinp.
// Thread (g = lane / 4, t = lane % 4) holds keys g and g + 8 of its warp's 16.
template <int HS>
__global__ void __launch_bounds__(kAttentionThreads)
    attention_backward_kernel(__nv_bfloat16* dinp, float* dq, const __nv_bfloat16* dout,
                              const __nv_bfloat16* inp, const float* lse, const float* delta, int T,
                              int C, int NH, float scale, float scale_log2) {
  constexpr int kStride = kTileStride<HS>;
  constexpr int kQTile = kQueryTile<HS>;
  constexpr int kSStride = kScoreStride<HS>;
  constexpr int kDSteps = HS / 16;
  constexpr int kQueryGroups = kQTile / 16;  // dq: warps split the tile's queries ...
  constexpr int kDSpan = HS * kQueryGroups / kAttentionWarps;  // ... and the head dimension
  static_assert(kDSpan == 64, "each warp's dq slice is 16 queries x 64 dimensions");
  TESSEL_DYNAMIC_SHARED(shared_bytes);
  auto* k_tile = reinterpret_cast<__nv_bfloat16*>(shared_bytes);
  __nv_bfloat16* v_tile = k_tile + kKeyTile * kStride;
  constexpr int kQElements = kQTile * kStride;
  __nv_bfloat16* q_tiles = v_tile + kKeyTile * kStride;  // buffer i at + i * kQElements
  __nv_bfloat16* dout_tiles = q_tiles + 2 * kQElements;
  __nv_bfloat16* ds_tile = dout_tiles + 2 * kQElements;  // (64 keys, kQTile queries)

  const int key_tile = blockIdx.x;
  const int b = blockIdx.y / NH;
  const int h = blockIdx.y % NH;
  const int k0 = key_tile * kKeyTile;
  const int64_t row_stride = 3 * int64_t(C);
  const __nv_bfloat16* q_head = inp + int64_t(b) * T * row_stride + h * HS;
  const __nv_bfloat16* k_head = q_head + C;
  const __nv_bfloat16* v_head = q_head + 2 * C;
  const __nv_bfloat16* dout_head = dout + int64_t(b) * T * C + h * HS;
  const float* lse_head = lse + (int64_t(b) * NH + h) * T;
  const float* delta_head = delta + (int64_t(b) * NH + h) * T;
  float* dq_head = dq + int64_t(b) * T * C + h * HS;

  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4;
  const int t = lane % 4;
  const int mi = lane / 8;
  const int key_lo = k0 + warp * 16 + g;
  const int key_hi = key_lo + 8;

  const int first_query_tile = k0 / kQTile;  // k0 is a multiple of kQTile
  const int query_tiles = int(ceil_div(T, kQTile));
  load_tile<kKeyTile, HS>(k_tile, k_head, row_stride, k0, T);
  load_tile<kKeyTile, HS>(v_tile, v_head, row_stride, k0, T);
  load_tile<kQTile, HS>(q_tiles, q_head, row_stride, first_query_tile * kQTile, T);
  load_tile<kQTile, HS>(dout_tiles, dout_head, C, first_query_tile * kQTile, T);
  cp_async_commit();

  float dk[HS / 8][4] = {};
  float dv[HS / 8][4] = {};

  for (int i = first_query_tile; i < query_tiles; ++i) {
    const int buffer = (i - first_query_tile) & 1;
    if (i + 1 < query_tiles) {
      const int next = (buffer ^ 1) * kQElements;
      load_tile<kQTile, HS>(q_tiles + next, q_head, row_stride, (i + 1) * kQTile, T);
      load_tile<kQTile, HS>(dout_tiles + next, dout_head, C, (i + 1) * kQTile, T);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const __nv_bfloat16* q_tile = q_tiles + buffer * kQElements;
    const __nv_bfloat16* dout_tile = dout_tiles + buffer * kQElements;
    const int q0 = i * kQTile;

    // s^T = k q^T and dp^T = v dout^T: 16 keys x kQTile queries per warp.
    float s[kQTile / 8][4] = {};
    float dp[kQTile / 8][4] = {};
#pragma unroll
    for (int dk_step = 0; dk_step < kDSteps; ++dk_step) {
      uint32_t ka[4], va[4];
      const int key_row = warp * 16 + (mi & 1) * 8 + lane % 8;
      const int a_chunk = 2 * dk_step + (mi >> 1);
      ldmatrix_x4(ka, k_tile + key_row * kStride + a_chunk * 8);
      ldmatrix_x4(va, v_tile + key_row * kStride + a_chunk * 8);
#pragma unroll
      for (int np = 0; np < kQTile / 16; ++np) {
        uint32_t qb[4], ob[4];
        const int query_row = np * 16 + (mi >> 1) * 8 + lane % 8;
        const int b_chunk = 2 * dk_step + (mi & 1);
        ldmatrix_x4(qb, q_tile + query_row * kStride + b_chunk * 8);
        ldmatrix_x4(ob, dout_tile + query_row * kStride + b_chunk * 8);
        mma_bf16(s[2 * np], ka, qb[0], qb[1]);
        mma_bf16(s[2 * np + 1], ka, qb[2], qb[3]);
        mma_bf16(dp[2 * np], va, ob[0], ob[1]);
        mma_bf16(dp[2 * np + 1], va, ob[2], ob[3]);
      }
    }

    // p^T = exp2(s scale log2e - lse log2e), 0 where the key is after the query or the query is
    // past T; then ds^T = p^T (dp^T - delta) in place of dp.
#pragma unroll
    for (int nt = 0; nt < kQTile / 8; ++nt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int query = q0 + nt * 8 + 2 * t + c;
        const bool query_valid = query < T;
        const float lse_log2 = query_valid ? lse_head[query] * kLog2e : 0.0f;
        const float row_delta = query_valid ? delta_head[query] : 0.0f;
        const float p_lo =
            query_valid && key_lo <= query ? exp2f(s[nt][c] * scale_log2 - lse_log2) : 0.0f;
        const float p_hi =
            query_valid && key_hi <= query ? exp2f(s[nt][2 + c] * scale_log2 - lse_log2) : 0.0f;
        s[nt][c] = p_lo;
        s[nt][2 + c] = p_hi;
        dp[nt][c] = p_lo * (dp[nt][c] - row_delta);
        dp[nt][2 + c] = p_hi * (dp[nt][2 + c] - row_delta);
      }
    }

    // dv += p^T dout and dk += ds^T q: A from registers (keys x queries), B = dout or q
    // (queries x HS, row major) through ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kQTile / 16; ++kk) {
      const uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                              pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const uint32_t dsa[4] = {pack_bf16(dp[2 * kk][0], dp[2 * kk][1]),
                               pack_bf16(dp[2 * kk][2], dp[2 * kk][3]),
                               pack_bf16(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                               pack_bf16(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
      for (int d_pair = 0; d_pair < HS / 16; ++d_pair) {
        uint32_t ob[4], qb[4];
        const int query_row = kk * 16 + (mi & 1) * 8 + lane % 8;
        const int chunk = 2 * d_pair + (mi >> 1);
        ldmatrix_x4_trans(ob, dout_tile + query_row * kStride + chunk * 8);
        ldmatrix_x4_trans(qb, q_tile + query_row * kStride + chunk * 8);
        mma_bf16(dv[2 * d_pair], pa, ob[0], ob[1]);
        mma_bf16(dv[2 * d_pair + 1], pa, ob[2], ob[3]);
        mma_bf16(dk[2 * d_pair], dsa, qb[0], qb[1]);
        mma_bf16(dk[2 * d_pair + 1], dsa, qb[2], qb[3]);
      }
    }

    // ds^T to shared memory, so that each warp can take a slice of dq over all 64 keys.
#pragma unroll
    for (int nt = 0; nt < kQTile / 8; ++nt) {
      const int column = nt * 8 + 2 * t;
      store_shared_b32(ds_tile + (warp * 16 + g) * kSStride + column,
                       pack_bf16(dp[nt][0], dp[nt][1]));
      store_shared_b32(ds_tile + (warp * 16 + g + 8) * kSStride + column,
                       pack_bf16(dp[nt][2], dp[nt][3]));
    }
    __syncthreads();  // ds^T complete; every warp is also done with this Q/dout buffer

    // dq[queries of group qg, dimensions of span dg] += scale * ds k: A = ds (queries x keys)
    // from ds^T by ldmatrix.trans, B = k (keys x HS) by ldmatrix.trans.
    const int qg = warp % kQueryGroups;
    const int dg = warp / kQueryGroups;
    uint32_t ds_frag[kKeyTile / 16][4];
#pragma unroll
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      const int key_row = kk * 16 + (mi >> 1) * 8 + lane % 8;
      ldmatrix_x4_trans(ds_frag[kk], ds_tile + key_row * kSStride + (2 * qg + (mi & 1)) * 8);
    }
    const int query_lo = q0 + qg * 16 + g;
    const int query_hi = query_lo + 8;
#pragma unroll
    for (int d_pair = 0; d_pair < kDSpan / 16; ++d_pair) {
      float acc[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < kKeyTile / 16; ++kk) {
        uint32_t kb[4];
        const int key_row = kk * 16 + (mi & 1) * 8 + lane % 8;
        const int chunk = dg * (kDSpan / 8) + 2 * d_pair + (mi >> 1);
        ldmatrix_x4_trans(kb, k_tile + key_row * kStride + chunk * 8);
        mma_bf16(acc[0], ds_frag[kk], kb[0], kb[1]);
        mma_bf16(acc[1], ds_frag[kk], kb[2], kb[3]);
      }
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const int d = dg * kDSpan + (2 * d_pair + x) * 8 + 2 * t;
        if (query_lo < T) {
          atomicAdd(dq_head + int64_t(query_lo) * C + d, acc[x][0] * scale);
          atomicAdd(dq_head + int64_t(query_lo) * C + d + 1, acc[x][1] * scale);
        }
        if (query_hi < T) {
          atomicAdd(dq_head + int64_t(query_hi) * C + d, acc[x][2] * scale);
          atomicAdd(dq_head + int64_t(query_hi) * C + d + 1, acc[x][3] * scale);
        }
      }
    }
  }

  // dinp's k and v columns of this block's keys += dk * scale, dv (no other block writes them).
  __nv_bfloat16* dk_head = dinp + int64_t(b) * T * row_stride + C + h * HS;
  __nv_bfloat16* dv_head = dk_head + C;
#pragma unroll
  for (int nd = 0; nd < HS / 8; ++nd) {
    const int d = nd * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = half == 0 ? key_lo : key_hi;
      if (key >= T) continue;
      auto* dk_pair = reinterpret_cast<__nv_bfloat162*>(dk_head + int64_t(key) * row_stride + d);
      auto* dv_pair = reinterpret_cast<__nv_bfloat162*>(dv_head + int64_t(key) * row_stride + d);
      const float2 dk_old = __bfloat1622float2(*dk_pair);
      const float2 dv_old = __bfloat1622float2(*dv_pair);
      *dk_pair = __floats2bfloat162_rn(dk_old.x + dk[nd][2 * half] * scale,
                                       dk_old.y + dk[nd][2 * half + 1] * scale);
      *dv_pair =
          __floats2bfloat162_rn(dv_old.x + dv[nd][2 * half], dv_old.y + dv[nd][2 * half + 1]);
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

template <int HS>
void launch_backward(bf16* dinp, const bf16* dout, const bf16* inp, const bf16* out,
                     const float* lse, int B, int T, int C, int NH, Context& ctx) {
  const cudaStream_t stream = ctx.stream();
  const int64_t BT = int64_t(B) * T;
  const size_t dq_bytes = (size_t(BT) * C * sizeof(float) + 255) / 256 * 256;
  auto* scratch = static_cast<char*>(ctx.scratch(dq_bytes + size_t(BT) * NH * sizeof(float)));
  auto* dq = reinterpret_cast<float*>(scratch);
  auto* delta = reinterpret_cast<float*>(scratch + dq_bytes);

  TESSEL_CUDA_CHECK(cudaMemsetAsync(dq, 0, size_t(BT) * C * sizeof(float), stream));
  TESSEL_LAUNCH(attention_delta_kernel<HS>, unsigned(ceil_div(BT * NH, 256)), 256, 0, stream)
  (delta, dout, out, B, T, C, NH);
  TESSEL_CUDA_CHECK_LAUNCH("attention_delta_kernel");

  constexpr size_t kShared = backward_shared_bytes<HS>();
  TESSEL_CUDA_CHECK(cudaFuncSetAttribute(
      attention_backward_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kShared)));
  const dim3 grid(unsigned(ceil_div(T, kKeyTile)), unsigned(B * NH));
  const float scale = 1.0f / std::sqrt(float(HS));
  TESSEL_LAUNCH(attention_backward_kernel<HS>, grid, kAttentionThreads, kShared, stream)
  (dinp, dq, dout, inp, lse, delta, T, C, NH, scale, scale * kLog2e);
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
    launch_backward<64>(dinp, dout, inp, out, lse, B, T, C, NH, ctx);
  } else {
    launch_backward<128>(dinp, dout, inp, out, lse, B, T, C, NH, ctx);
  }
}

}  // namespace tessel::kernels::cuda
