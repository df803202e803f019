#include "kernels/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu {
namespace {

// Tiles of C: 128 rows make two tiles of a 256-token micro-batch; 512 columns give the LM head
// (50257 columns) ~200 tiles, each still large enough to run near sgemm's peak. Measured on the
// 15 GEMMs of a GPT-2 124M step (quiet 2-core Zen 4, OpenBLAS 0.3.21): 2 threads take 1.11x the
// time of OpenBLAS's own (non-deterministic) threading, 1 thread 1.12x one untiled call.
constexpr int64_t kTileRows = 128;
constexpr int64_t kTileCols = 512;

// C (M x N, row-major, ldc = N) = op(A) op(B) + beta C, with each row of C first set to
// row_init when that is given (then beta is 1). op(A) is M x K, op(B) is K x N.
struct Gemm {
  bool trans_a;
  bool trans_b;
  int64_t M, N, K;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float beta;
  float* C;
  const float* row_init;
};

void tiled_sgemm(const Gemm& g) {
  const int64_t row_tiles = (g.M + kTileRows - 1) / kTileRows;
  const int64_t col_tiles = (g.N + kTileCols - 1) / kTileCols;
  parallel_for(row_tiles * col_tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t m0 = tile / col_tiles * kTileRows;
      const int64_t n0 = tile % col_tiles * kTileCols;
      const int64_t m = std::min(kTileRows, g.M - m0);
      const int64_t n = std::min(kTileCols, g.N - n0);
      float* c = g.C + m0 * g.N + n0;
      float beta = g.beta;
      if (g.row_init != nullptr) {
        for (int64_t i = 0; i < m; ++i) std::copy_n(g.row_init + n0, n, c + i * g.N);
        beta = 1.0f;
      }
      const float* a = g.trans_a ? g.A + m0 : g.A + m0 * g.lda;
      const float* b = g.trans_b ? g.B + n0 * g.ldb : g.B + n0;
      cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                  g.trans_b ? CblasTrans : CblasNoTrans, int(m), int(n), int(g.K), 1.0f, a,
                  int(g.lda), b, int(g.ldb), beta, c, int(g.N));
    }
  });
}

void check_shape(const char* op, int B, int T, int C, int OC) {
  detail::require_positive(B, op, "B");
  detail::require_positive(T, op, "T");
  detail::require_positive(C, op, "C");
  detail::require_positive(OC, op, "OC");
  if (int64_t(B) * T > INT_MAX) [[unlikely]] {
    detail::throw_invalid(op,
                          "B*T=" + std::to_string(int64_t(B) * T) + " exceeds the BLAS int range");
  }
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int B,
                    int T, int C, int OC) {
  constexpr const char* kOp = "matmul_forward";
  detail::require_pointer(out, kOp, "out");
  detail::require_pointer(inp, kOp, "inp");
  detail::require_pointer(weight, kOp, "weight");
  check_shape(kOp, B, T, C, OC);
  // out (BT x OC) = inp (BT x C) @ weight^T (C x OC)
  tiled_sgemm({.trans_a = false,
               .trans_b = true,
               .M = int64_t(B) * T,
               .N = OC,
               .K = C,
               .A = inp,
               .lda = C,
               .B = weight,
               .ldb = C,
               .beta = 0.0f,
               .C = out,
               .row_init = bias});
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int B, int T, int C, int OC) {
  constexpr const char* kOp = "matmul_backward";
  detail::require_pointer(dinp, kOp, "dinp");
  detail::require_pointer(dweight, kOp, "dweight");
  detail::require_pointer(dout, kOp, "dout");
  detail::require_pointer(inp, kOp, "inp");
  detail::require_pointer(weight, kOp, "weight");
  check_shape(kOp, B, T, C, OC);
  const int64_t rows = int64_t(B) * T;
  // dinp (BT x C) += dout (BT x OC) @ weight (OC x C)
  tiled_sgemm({.trans_a = false,
               .trans_b = false,
               .M = rows,
               .N = C,
               .K = OC,
               .A = dout,
               .lda = OC,
               .B = weight,
               .ldb = C,
               .beta = 1.0f,
               .C = dinp,
               .row_init = nullptr});
  // dweight (OC x C) += dout^T (OC x BT) @ inp (BT x C)
  tiled_sgemm({.trans_a = true,
               .trans_b = false,
               .M = OC,
               .N = C,
               .K = rows,
               .A = dout,
               .lda = OC,
               .B = inp,
               .ldb = C,
               .beta = 1.0f,
               .C = dweight,
               .row_init = nullptr});
  if (dbias == nullptr) return;
  // dbias sums dout over the rows: each chunk owns a block of columns and walks the rows in
  // order, so the sum order does not depend on the thread count.
  const int64_t blocks = (OC + kColumnBlock - 1) / kColumnBlock;
  parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    const int64_t c0 = begin * kColumnBlock;
    const int64_t c1 = std::min<int64_t>(OC, end * kColumnBlock);
    for (int64_t r = 0; r < rows; ++r) {
      const float* dy = dout + r * OC;
      int64_t c = c0;
      for (; c + 4 <= c1; c += 4)
        simd::store4(dbias + c, simd::load4(dbias + c) + simd::load4(dy + c));
      for (; c < c1; ++c) dbias[c] += dy[c];
    }
  });
}

}  // namespace tessel::kernels::cpu
