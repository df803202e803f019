// One cuBLASLt matrix product (internal to kernels/cuda), column-major as cuBLAS sees it:
//   D = op(A) op(B) + beta D, then the epilogue (bias, GELU), with op(A) m x k and op(B) k x n.
// A and B are bf16, the accumulation fp32; D is bf16 or fp32. A row-major matrix is its
// column-major transpose, which is how matmul.cu maps PyTorch's layout onto this.
#pragma once

#include <cublasLt.h>

#include <cstdint>

#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda::detail {

struct Gemm {
  cublasOperation_t transa = CUBLAS_OP_N;
  cublasOperation_t transb = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;  // bf16, stored (transa == N ? m x k : k x m), leading dimension lda
  int64_t lda = 0;
  const void* b = nullptr;  // bf16, stored (transb == N ? k x n : n x k)
  int64_t ldb = 0;
  void* d = nullptr;  // m x n, read too when beta != 0
  int64_t ldd = 0;
  cudaDataType_t d_type = CUDA_R_16BF;
  float beta = 0.0f;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // (m), D's type, for the BIAS epilogues
  void* aux = nullptr;         // m x n, leading dimension aux_ld: the GELU input, for GELU_AUX
  int64_t aux_ld = 0;
};

// Queues the product on ctx's stream. The algorithm is cuBLASLt's first heuristic choice for the
// problem (cached in ctx); throws CudaError when cuBLASLt has none, naming the problem.
void run_gemm(const Gemm& gemm, Context& ctx);

}  // namespace tessel::kernels::cuda::detail
