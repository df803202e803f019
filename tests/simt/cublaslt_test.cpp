// Tests the host cuBLASLt (cublaslt.cpp) through the public API, called the way
// kernels/cuda/gemm.cpp calls it, against a naive double-precision reference.
//
// Tolerance: a result may differ from the reference only by its one rounding into D's type, half a
// unit in the last place: at most 2^-8 of its magnitude for bf16, 2^-24 for fp32.
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr cublasStatus_t kSuccess = CUBLAS_STATUS_SUCCESS;
constexpr cublasStatus_t kInvalid = CUBLAS_STATUS_INVALID_VALUE;
constexpr cublasStatus_t kNotSupported = CUBLAS_STATUS_NOT_SUPPORTED;
constexpr double kAuxSentinel = -7.0;  // fills the aux buffer: what is never written keeps it

uint16_t to_bf16(float x) {  // nearest, ties to even; x is finite
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  return uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

double from_bf16(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

double gelu_tanh(double x) {
  const double inner = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * std::pow(x, 3));
  return 0.5 * x * (1.0 + std::tanh(inner));
}

size_t element_size(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

double get(cudaDataType_t type, const void* base, int64_t index) {
  const auto* at = static_cast<const std::byte*>(base) + index * element_size(type);
  if (type == CUDA_R_32F) {
    float value;
    std::memcpy(&value, at, sizeof value);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, at, sizeof bits);
  return from_bf16(bits);
}

void put(cudaDataType_t type, void* base, int64_t index, double value) {  // value fits the type
  auto* at = static_cast<std::byte*>(base) + index * element_size(type);
  if (type == CUDA_R_32F) {
    const float f = float(value);
    std::memcpy(at, &f, sizeof f);
  } else {
    const uint16_t bits = to_bf16(float(value));
    std::memcpy(at, &bits, sizeof bits);
  }
}

// Host memory starting on a 256-byte boundary, so each test decides how its pointers are aligned.
class Buffer {
 public:
  explicit Buffer(size_t bytes) : storage_(bytes + 256) {
    void* start = storage_.data();
    size_t space = storage_.size();
    data_ = static_cast<std::byte*>(std::align(256, bytes, start, space));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::byte* data() const { return data_; }

 private:
  std::vector<std::byte> storage_;
  std::byte* data_;
};

struct Deleter {
  void operator()(cublasLtHandle_t h) const { cublasLtDestroy(h); }
  void operator()(cublasLtMatmulDesc_t d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayout_t l) const { cublasLtMatrixLayoutDestroy(l); }
  void operator()(cublasLtMatmulPreference_t p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using Handle = std::unique_ptr<cublasLtContext, Deleter>;
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, Deleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, Deleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, Deleter>;

Layout make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, type, uint64_t(rows), uint64_t(cols), ld),
            kSuccess);
  return Layout(layout);
}

template <class T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value), kSuccess);
}

template <class T>
void set(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute,
         const T& value) {
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof value), kSuccess);
}

uint32_t alignment_of(const void* p) {  // as gemm.cpp computes it
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

bool has_bias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool has_gelu(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool has_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

struct Spec {
  cublasOperation_t transa = CUBLAS_OP_N;
  cublasOperation_t transb = CUBLAS_OP_N;
  int64_t m = 37, n = 5, k = 19;  // odd, so that no size lines up by luck
  cudaDataType_t d_type = CUDA_R_16BF;
  float alpha = 1.0f;
  float beta = 0.0f;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
};

std::string describe(const Spec& s) {
  return "transa=" + std::to_string(int(s.transa)) + " transb=" + std::to_string(int(s.transb)) +
         " d_type=" + std::to_string(int(s.d_type)) + " alpha=" + std::to_string(s.alpha) +
         " beta=" + std::to_string(s.beta) + " epilogue=" + std::to_string(int(s.epilogue));
}

// One product, set up as kernels/cuda/gemm.cpp sets it up: C is D, and the preference carries
// each pointer's alignment. A, B, D (C) and the bias hold random bf16 values in [-1, 1]; the aux
// buffer holds kAuxSentinel. Each leading dimension exceeds its rows, so writes outside the
// matrices show in the padding.
class Gemm {
 public:
  explicit Gemm(const Spec& s)
      : spec(s),
        a_rows(s.transa == CUBLAS_OP_N ? s.m : s.k),
        a_cols(s.transa == CUBLAS_OP_N ? s.k : s.m),
        b_rows(s.transb == CUBLAS_OP_N ? s.k : s.n),
        b_cols(s.transb == CUBLAS_OP_N ? s.n : s.k),
        lda(a_rows + 3),
        ldb(b_rows + 2),
        ldd(s.m + 4),
        aux_ld((s.m + 7) / 8 * 8 + 8),
        a(size_t(lda * a_cols) * 2),
        b(size_t(ldb * b_cols) * 2),
        d(size_t(ldd * s.n) * element_size(s.d_type)),
        bias(size_t(s.m) * element_size(s.d_type)),
        aux(size_t(aux_ld * s.n) * element_size(s.d_type)) {
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    auto fill = [&](cudaDataType_t type, void* base, int64_t count) {
      for (int64_t i = 0; i < count; ++i) put(type, base, i, from_bf16(to_bf16(uniform(rng))));
    };
    fill(CUDA_R_16BF, a.data(), lda * a_cols);
    fill(CUDA_R_16BF, b.data(), ldb * b_cols);
    fill(s.d_type, d.data(), ldd * s.n);
    fill(s.d_type, bias.data(), s.m);
    for (int64_t i = 0; i < aux_ld * s.n; ++i) put(s.d_type, aux.data(), i, kAuxSentinel);
    for (int64_t i = 0; i < ldd * s.n; ++i) d_before.push_back(get(s.d_type, d.data(), i));

    cublasLtHandle_t raw_handle = nullptr;
    EXPECT_EQ(cublasLtCreate(&raw_handle), kSuccess);
    handle.reset(raw_handle);
    cublasLtMatmulDesc_t raw_desc = nullptr;
    EXPECT_EQ(cublasLtMatmulDescCreate(&raw_desc, s.compute, s.scale), kSuccess);
    desc.reset(raw_desc);
    set(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(s.transa));
    set(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(s.transb));
    set(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(s.epilogue));
    if (has_bias(s.epilogue)) {
      set(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias.data()));
    }
    if (has_aux(s.epilogue)) {
      set(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(aux.data()));
      set(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
    }
    a_layout = make_layout(CUDA_R_16BF, a_rows, a_cols, lda);
    b_layout = make_layout(CUDA_R_16BF, b_rows, b_cols, ldb);
    d_layout = make_layout(s.d_type, s.m, s.n, ldd);
    c_layout = d_layout.get();

    cublasLtMatmulPreference_t raw_pref = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&raw_pref), kSuccess);
    pref.reset(raw_pref);
    set(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(1) << 20);
    set(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(a.data()));
    set(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(b.data()));
    set(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(d.data()));
    set(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(d.data()));
  }

  // Asks for one algorithm and keeps it in `algo`.
  cublasStatus_t heuristic() {
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle.get(), desc.get(), a_layout.get(), b_layout.get(),
                                       c_layout, d_layout.get(), pref.get(), 1, &result, &count);
    if (status == kSuccess) {
      EXPECT_EQ(count, 1);
      EXPECT_EQ(result.state, kSuccess);
      EXPECT_EQ(result.workspaceSize, 0u);
      algo = result.algo;
    } else {
      EXPECT_EQ(count, 0);
    }
    return status;
  }

  cublasStatus_t matmul(const cublasLtMatmulAlgo_t* chosen) {
    return cublasLtMatmul(handle.get(), desc.get(), alpha, a_ptr, a_layout.get(), b_ptr,
                          b_layout.get(), beta, c_ptr, c_layout, d_ptr, d_layout.get(), chosen,
                          workspace, workspace_bytes, nullptr);
  }

  cublasStatus_t run() {
    const cublasStatus_t status = heuristic();
    return status != kSuccess ? status : matmul(&algo);
  }

  void expect_matches_reference() const {
    const cudaDataType_t type = spec.d_type;
    const double ulp_half = type == CUDA_R_32F ? 0x1p-24 : 0x1p-8;  // relative; see the top
    bool d_ok = true, aux_ok = true;
    for (int64_t j = 0; j < spec.n; ++j) {
      for (int64_t i = 0; i < spec.m; ++i) {
        double sum = 0.0;
        for (int64_t l = 0; l < spec.k; ++l) {
          const int64_t ai = spec.transa == CUBLAS_OP_N ? i + l * lda : l + i * lda;
          const int64_t bi = spec.transb == CUBLAS_OP_N ? l + j * ldb : j + l * ldb;
          sum += get(CUDA_R_16BF, a.data(), ai) * get(CUDA_R_16BF, b.data(), bi);
        }
        double value = double(spec.alpha) * sum + double(spec.beta) * d_before[i + j * ldd];
        if (has_bias(spec.epilogue)) value += get(type, bias.data(), i);
        if (has_aux(spec.epilogue) && aux_ok) {
          const double got = get(type, aux.data(), i + j * aux_ld);
          aux_ok = std::fabs(got - value) <= ulp_half * std::fabs(value);
          EXPECT_TRUE(aux_ok) << "aux(" << i << ", " << j << ") = " << got << ", want " << value;
        }
        const double want = has_gelu(spec.epilogue) ? gelu_tanh(value) : value;
        if (d_ok) {
          const double got = get(type, d.data(), i + j * ldd);
          d_ok = std::fabs(got - want) <= ulp_half * std::fabs(want);
          EXPECT_TRUE(d_ok) << "D(" << i << ", " << j << ") = " << got << ", want " << want;
        }
      }
      for (int64_t i = spec.m; i < ldd; ++i) {
        EXPECT_EQ(get(type, d.data(), i + j * ldd), d_before[i + j * ldd]) << "D padding " << i;
      }
      const int64_t aux_written = has_aux(spec.epilogue) ? spec.m : 0;
      for (int64_t i = aux_written; i < aux_ld; ++i) {
        EXPECT_EQ(get(type, aux.data(), i + j * aux_ld), kAuxSentinel) << "aux " << i << ", " << j;
      }
    }
  }

  Spec spec;
  int64_t a_rows, a_cols, b_rows, b_cols;
  int64_t lda, ldb, ldd, aux_ld;  // aux_ld: above m, a multiple of 8
  Buffer a, b, d, bias, aux;
  std::vector<double> d_before;  // D (which is C) as filled, padding included
  Handle handle;
  MatmulDesc desc;
  Layout a_layout, b_layout, d_layout;
  Preference pref;
  Layout c_owned;  // a C layout of its own, when a test gives C one
  cublasLtMatmulAlgo_t algo{};
  // What matmul() passes: tests change them to break one thing at a time.
  cublasLtMatrixLayout_t c_layout = nullptr;
  const float* alpha = &spec.alpha;
  const float* beta = &spec.beta;
  const void* a_ptr = a.data();
  const void* b_ptr = b.data();
  const void* c_ptr = d.data();
  void* d_ptr = d.data();
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

constexpr cublasOperation_t kOps[] = {CUBLAS_OP_N, CUBLAS_OP_T};
constexpr cudaDataType_t kDTypes[] = {CUDA_R_16BF, CUDA_R_32F};
constexpr cublasLtEpilogue_t kEpilogues[] = {
    CUBLASLT_EPILOGUE_DEFAULT,   CUBLASLT_EPILOGUE_BIAS,     CUBLASLT_EPILOGUE_GELU,
    CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_AUX_BIAS};

TEST(CublasLt, MatchesReferenceForEveryTransposeTypeAndBeta) {
  for (const cublasOperation_t transa : kOps) {
    for (const cublasOperation_t transb : kOps) {
      for (const cudaDataType_t d_type : kDTypes) {
        for (const float beta : {0.0f, 1.0f}) {
          const Spec spec{.transa = transa, .transb = transb, .d_type = d_type, .beta = beta};
          SCOPED_TRACE(describe(spec));
          Gemm g(spec);
          ASSERT_EQ(g.run(), kSuccess);
          g.expect_matches_reference();
        }
      }
    }
  }
}

TEST(CublasLt, ScalesByAlphaAndBeta) {
  const Spec spec{.transa = CUBLAS_OP_T, .d_type = CUDA_R_32F, .alpha = -0.75f, .beta = 0.5f};
  Gemm g(spec);
  ASSERT_EQ(g.run(), kSuccess);
  g.expect_matches_reference();
}

TEST(CublasLt, EpiloguesMatchReference) {
  for (const cublasLtEpilogue_t epilogue : kEpilogues) {
    for (const cudaDataType_t d_type : kDTypes) {
      for (const float beta : {0.0f, 1.0f}) {
        // matmul.cu's forward product: A (the weight) transposed.
        const Spec spec{
            .transa = CUBLAS_OP_T, .d_type = d_type, .beta = beta, .epilogue = epilogue};
        SCOPED_TRACE(describe(spec));
        Gemm g(spec);
        ASSERT_EQ(g.run(), kSuccess);
        g.expect_matches_reference();
      }
    }
  }
}

TEST(CublasLt, BiasIsBroadcastAlongEachRow) {
  Gemm g({.alpha = 0.0f, .epilogue = CUBLASLT_EPILOGUE_BIAS});  // D = bias, column after column
  ASSERT_EQ(g.run(), kSuccess);
  for (int64_t j = 0; j < g.spec.n; ++j) {
    for (int64_t i = 0; i < g.spec.m; ++i) {
      ASSERT_EQ(get(CUDA_R_16BF, g.d.data(), i + j * g.ldd), get(CUDA_R_16BF, g.bias.data(), i));
    }
  }
}

TEST(CublasLt, RoundsToNearestEven) {
  // D = A (2 x 2) times a column of ones: 1 + 2^-8 is a tie between 1 and 1 + 2^-7, and
  // 1 + 2^-7 + 2^-8 one between 1 + 2^-7 and 1 + 2^-6; each goes to the even neighbour.
  Gemm g({.m = 2, .n = 1, .k = 2});
  const double a_values[2][2] = {{1.0, 0x1p-8}, {1.0 + 0x1p-7, 0x1p-8}};
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t l = 0; l < 2; ++l) {
      put(CUDA_R_16BF, g.a.data(), i + l * g.lda, a_values[i][l]);
      put(CUDA_R_16BF, g.b.data(), l, 1.0);
    }
  }
  ASSERT_EQ(g.run(), kSuccess);
  EXPECT_EQ(get(CUDA_R_16BF, g.d.data(), 0), 1.0);
  EXPECT_EQ(get(CUDA_R_16BF, g.d.data(), 1), 1.0 + 0x1p-6);
}

TEST(CublasLt, HeuristicOffersOneAlgorithmWithoutWorkspace) {
  Gemm g({});
  cublasLtMatmulHeuristicResult_t results[3] = {};
  int count = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(g.handle.get(), g.desc.get(), g.a_layout.get(),
                                           g.b_layout.get(), g.c_layout, g.d_layout.get(),
                                           g.pref.get(), 3, results, &count),
            kSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(results[0].state, kSuccess);
  EXPECT_EQ(results[0].workspaceSize, 0u);
}

TEST(CublasLt, NullAlgoMeansTheDefaultHeuristic) {
  Gemm g({.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS});
  ASSERT_EQ(g.matmul(nullptr), kSuccess);
  g.expect_matches_reference();
  // Its preferences assume 256-byte alignment.
  Gemm shifted({});
  shifted.d_ptr = shifted.d.data() + 16;
  shifted.c_ptr = shifted.d_ptr;
  EXPECT_EQ(shifted.matmul(nullptr), kInvalid);
}

TEST(CublasLtErrors, CreateNeedsSomewhereToPutTheResult) {
  EXPECT_EQ(cublasLtCreate(nullptr), kInvalid);
  EXPECT_EQ(cublasLtDestroy(nullptr), kInvalid);
  EXPECT_EQ(cublasLtMatmulDescCreate(nullptr, CUBLAS_COMPUTE_32F, CUDA_R_32F), kInvalid);
  EXPECT_EQ(cublasLtMatrixLayoutCreate(nullptr, CUDA_R_16BF, 1, 1, 1), kInvalid);
  EXPECT_EQ(cublasLtMatmulPreferenceCreate(nullptr), kInvalid);
}

TEST(CublasLtErrors, NullHandleIsNotInitialized) {
  Gemm g({});
  g.handle.reset();
  EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(g.matmul(nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST(CublasLtErrors, SetAttributeChecksTheValue) {
  Gemm g({});
  const int32_t op = CUBLAS_OP_T;
  const int64_t wide = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(nullptr, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op),
            kInvalid);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(g.desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4),
            kInvalid);
  EXPECT_EQ(
      cublasLtMatmulDescSetAttribute(g.desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide),
      kInvalid);
  const int32_t host = CUBLASLT_POINTER_MODE_HOST;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(g.desc.get(), CUBLASLT_MATMUL_DESC_POINTER_MODE, &host,
                                           sizeof host),
            kNotSupported);  // not implemented here

  const uint32_t three = 3;
  const uint64_t wide_alignment = 16;
  const uint32_t best_fit = CUBLASLT_SEARCH_BEST_FIT;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                nullptr, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &three, sizeof three),
            kInvalid);
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                g.pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &three, sizeof three),
            kInvalid);  // not a power of two
  EXPECT_EQ(
      cublasLtMatmulPreferenceSetAttribute(g.pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                           &wide_alignment, sizeof wide_alignment),
      kInvalid);
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(g.pref.get(), CUBLASLT_MATMUL_PREF_SEARCH_MODE,
                                                 &best_fit, sizeof best_fit),
            kNotSupported);  // not implemented here
}

// A valid product (from `spec`) broken in one way (by `breaks`).
struct Broken {
  const char* name;
  Spec spec;
  std::function<void(Gemm&)> breaks = [](Gemm&) {};
};

// The descriptors alone are wrong: the heuristic and cublasLtMatmul (with its implicit heuristic)
// must both answer `status`.
void expect_rejected(cublasStatus_t status, const std::vector<Broken>& cases) {
  for (const Broken& broken : cases) {
    SCOPED_TRACE(broken.name);
    Gemm g(broken.spec);
    broken.breaks(g);
    EXPECT_EQ(g.heuristic(), status);
    EXPECT_EQ(g.matmul(nullptr), status);
  }
}

// The heuristic's algorithm is fine, the call is not: cublasLtMatmul must answer `status`.
void expect_matmul_rejected(cublasStatus_t status, const std::vector<Broken>& cases) {
  for (const Broken& broken : cases) {
    SCOPED_TRACE(broken.name);
    Gemm g(broken.spec);
    ASSERT_EQ(g.heuristic(), kSuccess);
    broken.breaks(g);
    EXPECT_EQ(g.matmul(&g.algo), status);
  }
}

TEST(CublasLtErrors, UnsupportedProblemsHaveNoAlgorithm) {
  const int32_t fp32 = CUDA_R_32F;
  expect_rejected(
      kNotSupported,
      {{"compute type 16F", {.compute = CUBLAS_COMPUTE_16F, .scale = CUDA_R_16F}},
       {"scale type 16BF", {.scale = CUDA_R_16BF}},
       {"conjugate transpose", {.transa = CUBLAS_OP_C}},
       {"ReLU epilogue", {.epilogue = CUBLASLT_EPILOGUE_RELU}},
       {"DGELU epilogue", {.epilogue = CUBLASLT_EPILOGUE_DGELU}},
       {"BGRADB epilogue", {.epilogue = CUBLASLT_EPILOGUE_BGRADB}},
       {"fp16 D", {.d_type = CUDA_R_16F}},
       {"fp32 A",
        {},
        [](Gemm& g) { g.a_layout = make_layout(CUDA_R_32F, g.a_rows, g.a_cols, g.lda); }},
       {"fp16 B",
        {},
        [](Gemm& g) { g.b_layout = make_layout(CUDA_R_16F, g.b_rows, g.b_cols, g.ldb); }},
       {"C's type not D's",
        {},
        [](Gemm& g) {
          g.c_owned = make_layout(CUDA_R_32F, g.spec.m, g.spec.n, g.ldd);
          g.c_layout = g.c_owned.get();
        }},
       {"fp32 bias for a bf16 D",
        {.epilogue = CUBLASLT_EPILOGUE_BIAS},
        [&](Gemm& g) { set(g.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, fp32); }},
       {"rows beyond int32", {}, [](Gemm& g) {
          const int64_t rows = int64_t(1) << 31;
          g.a_layout = make_layout(CUDA_R_16BF, rows, g.a_cols, rows);
        }}});
}

TEST(CublasLtErrors, InconsistentShapesAreInvalid) {
  const int32_t fp32 = CUDA_R_32F;
  expect_rejected(
      kInvalid,
      {{"A's rows not D's",
        {},
        [](Gemm& g) { g.a_layout = make_layout(CUDA_R_16BF, g.a_rows + 1, g.a_cols, g.lda); }},
       {"B's columns not D's",
        {},
        [](Gemm& g) { g.b_layout = make_layout(CUDA_R_16BF, g.b_rows, g.b_cols + 1, g.ldb); }},
       {"A's k not B's",
        {},
        [](Gemm& g) { g.a_layout = make_layout(CUDA_R_16BF, g.a_rows, g.a_cols + 1, g.lda); }},
       {"transposed A described as op(A)",
        {.transa = CUBLAS_OP_T},
        [](Gemm& g) { g.a_layout = make_layout(CUDA_R_16BF, g.spec.m, g.spec.k, g.spec.m); }},
       {"C's shape not D's",
        {},
        [](Gemm& g) {
          g.c_owned = make_layout(g.spec.d_type, g.spec.m, g.spec.n + 1, g.ldd);
          g.c_layout = g.c_owned.get();
        }},
       {"lda below A's rows",
        {},
        [](Gemm& g) { g.a_layout = make_layout(CUDA_R_16BF, g.a_rows, g.a_cols, g.a_rows - 1); }},
       {"ldb below B's rows",
        {},
        [](Gemm& g) { g.b_layout = make_layout(CUDA_R_16BF, g.b_rows, g.b_cols, g.b_rows - 1); }},
       {"ldd below D's rows",
        {},
        [](Gemm& g) {
          g.d_layout = make_layout(g.spec.d_type, g.spec.m, g.spec.n, g.spec.m - 1);
          g.c_layout = g.d_layout.get();
        }},
       {"aux ld not a multiple of 8",
        {.epilogue = CUBLASLT_EPILOGUE_GELU_AUX},
        [](Gemm& g) { set(g.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(44)); }},
       {"aux ld below D's rows",
        {.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS},
        [](Gemm& g) { set(g.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(32)); }},
       {"fp32 aux for a bf16 D", {.epilogue = CUBLASLT_EPILOGUE_GELU_AUX}, [&](Gemm& g) {
          set(g.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, fp32);
        }}});
}

TEST(CublasLtErrors, NullDescriptorsAreInvalid) {
  expect_rejected(kInvalid, {{"no matmul descriptor", {}, [](Gemm& g) { g.desc.reset(); }},
                             {"no A layout", {}, [](Gemm& g) { g.a_layout.reset(); }},
                             {"no C layout", {}, [](Gemm& g) { g.c_layout = nullptr; }}});
}

TEST(CublasLtErrors, MissingPointersAreInvalid) {
  expect_matmul_rejected(
      kInvalid,
      {{"no alpha", {}, [](Gemm& g) { g.alpha = nullptr; }},
       {"no beta", {}, [](Gemm& g) { g.beta = nullptr; }},
       {"no A", {}, [](Gemm& g) { g.a_ptr = nullptr; }},
       {"no B", {}, [](Gemm& g) { g.b_ptr = nullptr; }},
       {"no D", {}, [](Gemm& g) { g.d_ptr = nullptr; }},
       {"no C with beta 1", {.beta = 1.0f}, [](Gemm& g) { g.c_ptr = nullptr; }},
       {"no bias",
        {.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS},
        [](Gemm& g) {
          set(g.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(nullptr));
        }},
       {"no aux", {.epilogue = CUBLASLT_EPILOGUE_GELU_AUX}, [](Gemm& g) {
          set(g.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(nullptr));
        }}});
}

TEST(CublasLtErrors, InPlaceNeedsOneLayout) {
  expect_matmul_rejected(kInvalid, {{"C = D with another ld", {.beta = 1.0f}, [](Gemm& g) {
                                       g.c_owned = make_layout(g.spec.d_type, g.spec.m, g.spec.n,
                                                               g.ldd + 1);
                                       g.c_layout = g.c_owned.get();
                                     }}});
}

TEST(CublasLtErrors, PointersMustBeAlignedAsPromised) {
  // The heuristic was told (or, for the bias and aux, saw) 256-byte alignment.
  expect_matmul_rejected(kInvalid,
                         {{"A", {}, [](Gemm& g) { g.a_ptr = g.a.data() + 2; }},
                          {"B", {}, [](Gemm& g) { g.b_ptr = g.b.data() + 8; }},
                          {"C and D", {}, [](Gemm& g) { g.c_ptr = g.d_ptr = g.d.data() + 16; }},
                          {"bias",
                           {.epilogue = CUBLASLT_EPILOGUE_BIAS},
                           [](Gemm& g) {
                             set(g.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                 static_cast<const void*>(g.bias.data() + 2));
                           }},
                          {"aux", {.epilogue = CUBLASLT_EPILOGUE_GELU_AUX}, [](Gemm& g) {
                             set(g.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                 static_cast<void*>(g.aux.data() + 16));
                           }}});
}

TEST(CublasLtErrors, AlignmentIsWhatThePreferenceSays) {
  Gemm g({});
  set(g.pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(2));
  ASSERT_EQ(g.heuristic(), kSuccess);
  g.a_ptr = g.a.data() + 2;  // one bf16 on: as promised
  EXPECT_EQ(g.matmul(&g.algo), kSuccess);
  // Less than a bf16's own alignment leaves no algorithm.
  set(g.pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(1));
  EXPECT_EQ(g.heuristic(), kNotSupported);
}

TEST(CublasLtErrors, WorkspaceMustBe256ByteAligned) {
  Gemm g({});
  ASSERT_EQ(g.heuristic(), kSuccess);
  const Buffer workspace(1024);
  g.workspace = workspace.data() + 64;
  g.workspace_bytes = 512;
  EXPECT_EQ(g.matmul(&g.algo), kInvalid);
  g.workspace = workspace.data();
  EXPECT_EQ(g.matmul(&g.algo), kSuccess);
}

TEST(CublasLtErrors, AlgoMustComeFromTheHeuristicForThisType) {
  Gemm fp32({.d_type = CUDA_R_32F});  // fp32, whose cudaDataType_t is 0 like the zeros' type
  const cublasLtMatmulAlgo_t zeros{};
  EXPECT_EQ(fp32.matmul(&zeros), kInvalid);
  ASSERT_EQ(fp32.heuristic(), kSuccess);
  Gemm bf16({});
  EXPECT_EQ(bf16.matmul(&fp32.algo), kInvalid);
}

TEST(CublasLtErrors, HeuristicChecksItsArguments) {
  Gemm g({});
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  auto heuristic = [&](cublasLtMatmulPreference_t pref, int requested,
                       cublasLtMatmulHeuristicResult_t* results, int* returned) {
    return cublasLtMatmulAlgoGetHeuristic(g.handle.get(), g.desc.get(), g.a_layout.get(),
                                          g.b_layout.get(), g.c_layout, g.d_layout.get(), pref,
                                          requested, results, returned);
  };
  EXPECT_EQ(heuristic(g.pref.get(), 0, &result, &count), kInvalid);
  EXPECT_EQ(heuristic(g.pref.get(), 1, nullptr, &count), kInvalid);
  EXPECT_EQ(heuristic(g.pref.get(), 1, &result, nullptr), kInvalid);
  EXPECT_EQ(heuristic(nullptr, 1, &result, &count), kInvalid);
}

TEST(CublasLt, NamesEveryStatus) {
  EXPECT_STREQ(cublasLtGetStatusName(kSuccess), "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(cublasLtGetStatusName(kNotSupported), "CUBLAS_STATUS_NOT_SUPPORTED");
  for (const cublasStatus_t status :
       {CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_ALLOC_FAILED,
        CUBLAS_STATUS_INVALID_VALUE, CUBLAS_STATUS_ARCH_MISMATCH, CUBLAS_STATUS_MAPPING_ERROR,
        CUBLAS_STATUS_EXECUTION_FAILED, CUBLAS_STATUS_INTERNAL_ERROR, CUBLAS_STATUS_NOT_SUPPORTED,
        CUBLAS_STATUS_LICENSE_ERROR}) {
    EXPECT_EQ(std::string(cublasLtGetStatusName(status)).rfind("CUBLAS_STATUS_", 0), 0u);
    EXPECT_STRNE(cublasLtGetStatusString(status), "");
  }
}

}  // namespace
