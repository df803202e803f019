#include "kernels/cuda/gemm.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/check.h"

namespace tessel::kernels::cuda::detail {
namespace {

// The largest power of two (up to 256) that divides the address: what cuBLASLt may assume.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

struct DescDeleter {
  void operator()(cublasLtMatmulDesc_t d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayout_t l) const { cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreference_t p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

template <class T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  TESSEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
}

Layout layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  TESSEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), ld));
  return Layout(l);
}

std::string describe(const Gemm& g) {
  return "m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " transa=" + std::to_string(int(g.transa)) + " transb=" + std::to_string(int(g.transb)) +
         " lda=" + std::to_string(g.lda) + " ldb=" + std::to_string(g.ldb) +
         " ldd=" + std::to_string(g.ldd) + " epilogue=" + std::to_string(int(g.epilogue));
}

}  // namespace

void run_gemm(const Gemm& g, Context& ctx) {
  cublasLtMatmulDesc_t raw_desc = nullptr;
  TESSEL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const MatmulDesc desc(raw_desc);
  set(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(g.transa));
  set(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(g.transb));
  set(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(g.epilogue));
  if (g.bias != nullptr) set(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.aux != nullptr) {
    set(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(g.aux));
    set(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux_ld);
  }
  const bool a_plain = g.transa == CUBLAS_OP_N;
  const bool b_plain = g.transb == CUBLAS_OP_N;
  const Layout a = layout(CUDA_R_16BF, a_plain ? g.m : g.k, a_plain ? g.k : g.m, g.lda);
  const Layout b = layout(CUDA_R_16BF, b_plain ? g.k : g.n, b_plain ? g.n : g.k, g.ldb);
  const Layout d = layout(g.d_type, g.m, g.n, g.ldd);

  const uint32_t align_a = alignment_of(g.a), align_b = alignment_of(g.b),
                 align_d = alignment_of(g.d);
  const Context::GemmKey key = {int64_t(g.transa),
                                int64_t(g.transb),
                                g.m,
                                g.n,
                                g.k,
                                g.lda,
                                g.ldb,
                                g.ldd,
                                int64_t(g.d_type),
                                g.beta != 0.0f,
                                int64_t(g.epilogue),
                                align_a,
                                align_b,
                                align_d,
                                g.bias == nullptr ? 0 : int64_t(alignment_of(g.bias)),
                                g.aux == nullptr ? 0 : g.aux_ld * 1024 + alignment_of(g.aux)};
  auto& algorithms = ctx.gemm_algorithms();
  auto found = algorithms.find(key);
  if (found == algorithms.end()) {
    cublasLtMatmulPreference_t raw_pref = nullptr;
    TESSEL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
    const Preference pref(raw_pref);
    const uint64_t workspace = ctx.blas_workspace_bytes();
    TESSEL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
    // The heuristic never sees the data pointers: tell it how they are aligned (C is D).
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}};
    for (const auto& [attribute, value] : alignments) {
      TESSEL_CUBLAS_CHECK(
          cublasLtMatmulPreferenceSetAttribute(raw_pref, attribute, &value, sizeof value));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    // With nothing to offer, the heuristic returns NOT_SUPPORTED rather than a count of 0.
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        ctx.blas(), raw_desc, a.get(), b.get(), d.get(), d.get(), raw_pref, 1, &result, &count);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && count == 0)) {
      throw CudaError("cuBLASLt has no algorithm for the GEMM " + describe(g));
    }
    TESSEL_CUBLAS_CHECK(status);
    TESSEL_CUBLAS_CHECK(result.state);
    found = algorithms.emplace(key, result.algo).first;
  }
  const float alpha = 1.0f;
  TESSEL_CUBLAS_CHECK(cublasLtMatmul(
      ctx.blas(), raw_desc, &alpha, g.a, a.get(), g.b, b.get(), &g.beta, g.d, d.get(), g.d, d.get(),
      &found->second, ctx.blas_workspace(), ctx.blas_workspace_bytes(), ctx.stream()));
}

}  // namespace tessel::kernels::cuda::detail
