#include <limits>
#include <string>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul.h"

namespace tessel::kernels::cuda {
namespace {

using namespace detail;
namespace checks = cpu::detail;

constexpr int kBiasThreads = 256;       // 8 warps
constexpr int kBiasColumns = 256;       // per block: 8 per lane
constexpr int kBiasRowsPerBlock = 256;  // fixed by the shape alone, so the sums are too

void check_shape(const char* op, int B, int T, int C, int OC) {
  checks::require_positive(B, op, "B");
  checks::require_positive(T, op, "T");
  checks::require_positive(C, op, "C");
  checks::require_positive(OC, op, "OC");
}

// Block (x, y) sums dout over rows [y * kBiasRowsPerBlock, +kBiasRowsPerBlock) for the 256
// columns x * 256 + [0, 256): lane l takes 8 consecutive columns, warp w every 8th row. The 8
// warps' sums are added in warp order into partial[y * OC + column].
__global__ void bias_partial_kernel(float* partial, const bf16* dout, int64_t rows, int OC,
                                    bool vector) {
  __shared__ float warp_sums[kBiasThreads / kWarpSize][kBiasColumns];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int column = blockIdx.x * kBiasColumns + lane * 8;
  const int n = max(0, min(8, OC - column));
  const int64_t row0 = int64_t(blockIdx.y) * kBiasRowsPerBlock;
  const int64_t row1 = min(rows, row0 + kBiasRowsPerBlock);
  float sum[8] = {};
  if (n > 0) {
#pragma unroll 4
    for (int64_t r = row0 + warp; r < row1; r += kBiasThreads / kWarpSize) {
      float d[8];
      load8(dout + r * OC + column, n, vector, d);
#pragma unroll
      for (int j = 0; j < 8; ++j) sum[j] += d[j];
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) warp_sums[warp][lane * 8 + j] = sum[j];
  __syncthreads();
  const int c = blockIdx.x * kBiasColumns + threadIdx.x;
  if (c < OC) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kBiasThreads / kWarpSize; ++w) total += warp_sums[w][threadIdx.x];
    partial[int64_t(blockIdx.y) * OC + c] = total;
  }
}

void check_rows(const char* op, int64_t rows) {
  if (rows > std::numeric_limits<int>::max()) {
    checks::throw_invalid(op, "B*T=" + std::to_string(rows) + " is above the int range");
  }
}

// out = inp @ weight^T in cuBLAS's column-major terms: out is D (OC x BT, ld OC) = op(A) B with
// A = weight stored C x OC (ld C) and transposed, B = inp stored C x BT (ld C).
Gemm forward_gemm(bf16* out, const bf16* inp, const bf16* weight, int64_t rows, int C, int OC) {
  Gemm g;
  g.transa = CUBLAS_OP_T;
  g.transb = CUBLAS_OP_N;
  g.m = OC;
  g.n = rows;
  g.k = C;
  g.a = weight;
  g.lda = C;
  g.b = inp;
  g.ldb = C;
  g.d = out;
  g.ldd = OC;
  return g;
}

}  // namespace

void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int B, int T,
                    int C, int OC, Context& ctx) {
  constexpr const char* kOp = "matmul_forward";
  checks::require_pointer(out, kOp, "out");
  checks::require_pointer(inp, kOp, "inp");
  checks::require_pointer(weight, kOp, "weight");
  check_shape(kOp, B, T, C, OC);
  Gemm g = forward_gemm(out, inp, weight, int64_t(B) * T, C, OC);
  if (bias != nullptr) {
    g.epilogue = CUBLASLT_EPILOGUE_BIAS;
    g.bias = bias;
  }
  run_gemm(g, ctx);
}

void matmul_gelu_forward(bf16* out, bf16* pre_gelu, const bf16* inp, const bf16* weight,
                         const bf16* bias, int B, int T, int C, int OC, Context& ctx) {
  constexpr const char* kOp = "matmul_gelu_forward";
  checks::require_pointer(out, kOp, "out");
  checks::require_pointer(pre_gelu, kOp, "pre_gelu");
  checks::require_pointer(inp, kOp, "inp");
  checks::require_pointer(weight, kOp, "weight");
  check_shape(kOp, B, T, C, OC);
  if (OC % 8 != 0) {  // the GELU_AUX epilogue's leading-dimension rule
    matmul_forward(pre_gelu, inp, weight, bias, B, T, C, OC, ctx);
    gelu_forward(out, pre_gelu, int64_t(B) * T * OC, ctx);
    return;
  }
  Gemm g = forward_gemm(out, inp, weight, int64_t(B) * T, C, OC);
  g.epilogue = bias != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  g.bias = bias;
  g.aux = pre_gelu;
  g.aux_ld = OC;
  run_gemm(g, ctx);
}

void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                     const bf16* weight, int B, int T, int C, int OC, Context& ctx) {
  constexpr const char* kOp = "matmul_backward";
  checks::require_pointer(dinp, kOp, "dinp");
  checks::require_pointer(dweight, kOp, "dweight");
  checks::require_pointer(dout, kOp, "dout");
  checks::require_pointer(inp, kOp, "inp");
  checks::require_pointer(weight, kOp, "weight");
  check_shape(kOp, B, T, C, OC);
  const int64_t rows = int64_t(B) * T;
  check_rows(kOp, rows);

  // dinp (C x BT, ld C) += weight (stored C x OC, ld C) @ dout (stored OC x BT, ld OC)
  Gemm g_inp;
  g_inp.m = C;
  g_inp.n = rows;
  g_inp.k = OC;
  g_inp.a = weight;
  g_inp.lda = C;
  g_inp.b = dout;
  g_inp.ldb = OC;
  g_inp.d = dinp;
  g_inp.ldd = C;
  g_inp.beta = 1.0f;
  run_gemm(g_inp, ctx);

  // dweight (C x OC, ld C; fp32) += inp (stored C x BT, ld C) @ dout^T (dout stored OC x BT)
  Gemm g_weight;
  g_weight.transb = CUBLAS_OP_T;
  g_weight.m = C;
  g_weight.n = OC;
  g_weight.k = rows;
  g_weight.a = inp;
  g_weight.lda = C;
  g_weight.b = dout;
  g_weight.ldb = OC;
  g_weight.d = dweight;
  g_weight.ldd = C;
  g_weight.d_type = CUDA_R_32F;
  g_weight.beta = 1.0f;
  run_gemm(g_weight, ctx);

  if (dbias != nullptr) {
    const int row_blocks = int(ceil_div(rows, kBiasRowsPerBlock));
    auto* partial = static_cast<float*>(ctx.scratch(size_t(row_blocks) * OC * sizeof(float)));
    const bool vector = OC % 8 == 0 && aligned16(dout);
    const dim3 grid(unsigned(ceil_div(OC, kBiasColumns)), unsigned(row_blocks));
    TESSEL_LAUNCH(bias_partial_kernel, grid, kBiasThreads, 0, ctx.stream())
    (partial, dout, rows, OC, vector);
    TESSEL_CUDA_CHECK_LAUNCH("bias_partial_kernel");
    add_column_sums(dbias, partial, row_blocks, OC, OC, ctx.stream());
  }
}

}  // namespace tessel::kernels::cuda
