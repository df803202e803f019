// A host stand-in for the part of cuBLASLt that kernels/cuda uses (gemm.cpp, context.cpp,
// check.cpp), for the CPU emulator: "device" pointers are host pointers, and cublasLtMatmul runs
// at once on the calling thread, ignoring the stream.
//
// It follows NVIDIA's documented semantics, strictly, so that what a GPU would reject (or might
// run wrongly) fails here too. The source is the cuBLASLt API reference,
// https://docs.nvidia.com/cuda/cublas/index.html#using-the-cublaslt-api, whose text for each
// attribute and epilogue is also the doc comments of CUDA 13's cublasLt.h:
// - D = alpha op(A) op(B) + beta C, then the epilogue. Layouts are column-major (ld is the stride
//   between columns, in elements, and at least the rows) and describe the matrices as stored, so A
//   is k x m when TRANSA is T. Rows and columns beyond the int32_t range are not supported.
// - cublasLtMatmul's table of supported types: with CUBLAS_COMPUTE_32F and scale CUDA_R_32F, A and
//   B CUDA_R_16BF, C and D both CUDA_R_16BF or both CUDA_R_32F. Nothing else is implemented here.
// - CUBLASLT_EPILOGUE_BIAS: a packed vector of D's rows, broadcast to every column, added before
//   the activation. CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE defaults (-1) to D's type, the only bias
//   type the table lists for these types.
// - GELU_AUX epilogues write the GELU input (after the bias) to EPILOGUE_AUX_POINTER, in D's type
//   unless EPILOGUE_AUX_DATA_TYPE says otherwise, which for these types cublasLtMatmul answers with
//   CUBLAS_STATUS_INVALID_VALUE. EPILOGUE_AUX_LD must be divisible by 8 and at least D's rows.
// - GELU is the tanh approximation, as cuBLASLt computes it (PyTorch's addmm GELU epilogue is its
//   gelu(approximate="tanh"): https://github.com/NVIDIA/TensorRT-LLM/pull/17693).
// - The heuristic never dereferences pointers: MIN_ALIGNMENT_{A,B,C,D}_BYTES (default 256) and the
//   values of the bias and aux pointers tell it the alignment its algorithm may assume, so the
//   algorithm is only valid for pointers aligned at least that well. It answers
//   CUBLAS_STATUS_NOT_SUPPORTED when it has no algorithm for a problem (e.g.
//   https://github.com/Comfy-Org/ComfyUI/issues/7073), CUBLAS_STATUS_INVALID_VALUE when
//   requestedAlgoCount <= 0.
// - cublasLtMatmul with a NULL algo runs an implicit heuristic query with default preferences; in
//   place (C == D) C's layout must be D's; the workspace must be 256-byte aligned (as in
//   https://github.com/NVIDIA/TransformerEngine/pull/2223); a handle that was never created is
//   CUBLAS_STATUS_NOT_INITIALIZED. Setting an attribute from a NULL buffer or one whose size is not
//   the attribute's is CUBLAS_STATUS_INVALID_VALUE.
// Attributes this file does not implement answer CUBLAS_STATUS_NOT_SUPPORTED.
#include <cublasLt.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <new>
#include <numbers>
#include <optional>
#include <type_traits>

// cublasLt.h declares the handle's struct and leaves it to the library; this one needs no state.
struct cublasLtContext {};

namespace {

constexpr uint32_t kDefaultAlignment = 256;  // bytes; also what the workspace needs

// The state behind each descriptor, kept inside the header's fixed-size opaque structs.
struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};

struct Desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's type
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t aux_type = -1;  // -1: D's type
};

struct Preference {
  uint64_t max_workspace_bytes = 0;  // recorded only: no algorithm here needs a workspace
  uint32_t align_a = kDefaultAlignment, align_b = kDefaultAlignment;
  uint32_t align_c = kDefaultAlignment, align_d = kDefaultAlignment;
};

// What the heuristic chose for: D's type and the alignment each pointer was promised to have.
struct Algo {
  uint64_t tag;  // kAlgoTag: made by this file's heuristic, not zeros or garbage
  cudaDataType_t d_type;
  uint32_t align_a, align_b, align_c, align_d, align_bias, align_aux;
};
constexpr uint64_t kAlgoTag = 0x7e55e1c0ffee1a5a;  // an arbitrary marker

// The opaque structs are plain arrays of words, so state moves in and out by memcpy.
template <class State, class Opaque>
State load(const Opaque* opaque) {
  static_assert(std::is_trivially_copyable_v<State> && sizeof(State) <= sizeof(Opaque::data));
  State state;
  std::memcpy(&state, opaque->data, sizeof state);
  return state;
}

template <class Opaque, class State>
void store(Opaque* opaque, const State& state) {
  static_assert(std::is_trivially_copyable_v<State> && sizeof(State) <= sizeof(Opaque::data));
  std::memcpy(opaque->data, &state, sizeof state);
}

template <class Opaque, class State>
cublasStatus_t create(Opaque** created, const State& state) {
  if (created == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* opaque = new (std::nothrow) Opaque{};
  if (opaque == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  store(opaque, state);
  *created = opaque;
  return CUBLAS_STATUS_SUCCESS;
}

// An attribute's value: the buffer must hold exactly one T.
template <class T>
cublasStatus_t read(const void* buf, size_t size, T& value) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&value, buf, sizeof value);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t read_alignment(const void* buf, size_t size, uint32_t& alignment) {
  uint32_t value = 0;
  const cublasStatus_t status = read(buf, size, value);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (!std::has_single_bit(value)) return CUBLAS_STATUS_INVALID_VALUE;  // an alignment
  alignment = value;
  return CUBLAS_STATUS_SUCCESS;
}

// The largest power of two, up to 256, that divides the address (256 for null).
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = kDefaultAlignment;
  while (address % alignment != 0) alignment /= 2;
  return alignment;
}

bool aligned(const void* p, uint32_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

uint32_t element_size(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

struct Epilogue {
  bool bias, gelu, aux;
};

std::optional<Epilogue> epilogue_of(uint32_t epilogue) {
  switch (epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT:
      return Epilogue{false, false, false};
    case CUBLASLT_EPILOGUE_BIAS:
      return Epilogue{true, false, false};
    case CUBLASLT_EPILOGUE_GELU:
      return Epilogue{false, true, false};
    case CUBLASLT_EPILOGUE_GELU_BIAS:
      return Epilogue{true, true, false};
    case CUBLASLT_EPILOGUE_GELU_AUX:
      return Epilogue{false, true, true};
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
      return Epilogue{true, true, true};
    default:
      return std::nullopt;
  }
}

struct Problem {
  int64_t m, n, k;
  bool transa, transb;
  Epilogue epilogue;
};

bool supported_op(int32_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T; }

// What the descriptors alone decide, for the heuristic and cublasLtMatmul alike.
cublasStatus_t check(const Desc& desc, const Layout& a, const Layout& b, const Layout& c,
                     const Layout& d, Problem& problem) {
  const std::optional<Epilogue> epilogue = epilogue_of(desc.epilogue);
  if (desc.compute != CUBLAS_COMPUTE_32F || desc.scale != CUDA_R_32F ||
      !supported_op(desc.transa) || !supported_op(desc.transb) || !epilogue ||
      a.type != CUDA_R_16BF || b.type != CUDA_R_16BF || c.type != d.type ||
      (d.type != CUDA_R_16BF && d.type != CUDA_R_32F) ||
      (epilogue->bias && desc.bias_type != -1 && desc.bias_type != d.type)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  for (const Layout* layout : {&a, &b, &c, &d}) {
    constexpr uint64_t kMaxDimension = std::numeric_limits<int32_t>::max();
    if (layout->rows > kMaxDimension || layout->cols > kMaxDimension) {
      return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (layout->ld < std::max<int64_t>(1, int64_t(layout->rows))) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  const bool transa = desc.transa == CUBLAS_OP_T, transb = desc.transb == CUBLAS_OP_T;
  const uint64_t k = transa ? a.rows : a.cols;
  if ((transa ? a.cols : a.rows) != d.rows || (transb ? b.rows : b.cols) != d.cols ||
      (transb ? b.cols : b.rows) != k || c.rows != d.rows || c.cols != d.cols) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (epilogue->aux && ((desc.aux_type != -1 && desc.aux_type != d.type) ||
                        desc.aux_ld < int64_t(d.rows) || desc.aux_ld % 8 != 0)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  problem = {int64_t(d.rows), int64_t(d.cols), int64_t(k), transa, transb, *epilogue};
  return CUBLAS_STATUS_SUCCESS;
}

Algo choose(const Desc& desc, const Problem& problem, cudaDataType_t d_type,
            const Preference& pref) {
  return {kAlgoTag,
          d_type,
          pref.align_a,
          pref.align_b,
          pref.align_c,
          pref.align_d,
          problem.epilogue.bias ? alignment_of(desc.bias) : kDefaultAlignment,
          problem.epilogue.aux ? alignment_of(desc.aux) : kDefaultAlignment};
}

// No kernel reads an element across its natural alignment: a weaker promise leaves no algorithm.
bool alignments_possible(const Algo& algo) {
  const uint32_t d_size = element_size(algo.d_type);
  return algo.align_a >= 2 && algo.align_b >= 2 && algo.align_c >= d_size &&
         algo.align_d >= d_size && algo.align_bias >= d_size && algo.align_aux >= d_size;
}

double load_element(cudaDataType_t type, const void* base, int64_t index) {
  if (type == CUDA_R_32F) {
    float value;
    std::memcpy(&value, static_cast<const float*>(base) + index, sizeof value);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, static_cast<const uint16_t*>(base) + index, sizeof bits);
  return std::bit_cast<float>(uint32_t(bits) << 16);
}

// Rounds to the nearest bf16, ties to even, in one step (through float it would be two).
uint16_t to_bf16(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return 0x7fc0;
  if (std::isinf(x)) return sign | 0x7f80;
  int exponent = 0;
  std::frexp(x, &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  // 8 significant bits, down to the normal range's end (2^-126); subnormals step by 2^-133.
  const int step = std::max(exponent, -125) - 8;
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(std::fabs(x), -step)), step);
  if (rounded > std::ldexp(255.0, 120)) return sign | 0x7f80;  // above bf16's largest finite
  return sign | uint16_t(std::bit_cast<uint32_t>(float(rounded)) >> 16);
}

void store_element(cudaDataType_t type, void* base, int64_t index, double value) {
  if (type == CUDA_R_32F) {
    const float rounded = float(value);
    std::memcpy(static_cast<float*>(base) + index, &rounded, sizeof rounded);
    return;
  }
  const uint16_t bits = to_bf16(value);
  std::memcpy(static_cast<uint16_t*>(base) + index, &bits, sizeof bits);
}

double gelu(double x) {
  constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

// Accumulates in double and rounds once into D's type (and the aux buffer's).
void multiply(const Problem& p, const Desc& desc, float alpha, float beta, const void* a,
              const Layout& a_layout, const void* b, const Layout& b_layout, const void* c,
              const Layout& c_layout, void* d, const Layout& d_layout) {
  const cudaDataType_t type = d_layout.type;  // C's, the bias's and the aux buffer's too
  for (int64_t j = 0; j < p.n; ++j) {
    for (int64_t i = 0; i < p.m; ++i) {
      double sum = 0.0;
      for (int64_t l = 0; l < p.k; ++l) {
        const int64_t ai = p.transa ? l + i * a_layout.ld : i + l * a_layout.ld;
        const int64_t bi = p.transb ? j + l * b_layout.ld : l + j * b_layout.ld;
        sum += load_element(CUDA_R_16BF, a, ai) * load_element(CUDA_R_16BF, b, bi);
      }
      double value = double(alpha) * sum;
      if (beta != 0.0f) value += double(beta) * load_element(type, c, i + j * c_layout.ld);
      if (p.epilogue.bias) value += load_element(type, desc.bias, i);
      if (p.epilogue.aux) store_element(type, desc.aux, i + j * desc.aux_ld, value);
      if (p.epilogue.gelu) value = gelu(value);
      store_element(type, d, i + j * d_layout.ld, value);
    }
  }
}

struct StatusText {
  cublasStatus_t status;
  const char* name;
  const char* text;
};

constexpr StatusText kStatusTexts[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "the operation completed successfully"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED",
     "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE",
     "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH",
     "an absent device architectural feature is required"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR",
     "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED",
     "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED",
     "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR",
     "an error detected when checking the current licensing"},
};

const StatusText* find_status(cublasStatus_t status) {
  for (const StatusText& entry : kStatusTexts) {
    if (entry.status == status) return &entry;
  }
  return nullptr;
}

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = new (std::nothrow) cublasLtContext{};
  return *lightHandle == nullptr ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  const StatusText* entry = find_status(status);
  return entry != nullptr ? entry->name : "CUBLAS_STATUS_UNKNOWN";
}

const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  const StatusText* entry = find_status(status);
  return entry != nullptr ? entry->text : "unknown status";
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  return create(matLayout, Layout{type, rows, cols, ld});
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  delete matLayout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                                     cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  return create(matmulDesc, Desc{.compute = computeType, .scale = scaleType});
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  delete matmulDesc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void* buf, size_t sizeInBytes) {
  if (matmulDesc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  Desc desc = load<Desc>(matmulDesc);
  cublasStatus_t status;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      status = read(buf, sizeInBytes, desc.transa);
      break;
    case CUBLASLT_MATMUL_DESC_TRANSB:
      status = read(buf, sizeInBytes, desc.transb);
      break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      status = read(buf, sizeInBytes, desc.epilogue);
      break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      status = read(buf, sizeInBytes, desc.bias);
      break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      status = read(buf, sizeInBytes, desc.bias_type);
      break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      status = read(buf, sizeInBytes, desc.aux);
      break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      status = read(buf, sizeInBytes, desc.aux_ld);
      break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      status = read(buf, sizeInBytes, desc.aux_type);
      break;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (status == CUBLAS_STATUS_SUCCESS) store(matmulDesc, desc);
  return status;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return create(pref, Preference{});
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
    size_t sizeInBytes) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  Preference preference = load<Preference>(pref);
  cublasStatus_t status;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      status = read(buf, sizeInBytes, preference.max_workspace_bytes);
      break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      status = read_alignment(buf, sizeInBytes, preference.align_a);
      break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      status = read_alignment(buf, sizeInBytes, preference.align_b);
      break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      status = read_alignment(buf, sizeInBytes, preference.align_c);
      break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      status = read_alignment(buf, sizeInBytes, preference.align_d);
      break;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (status == CUBLAS_STATUS_SUCCESS) store(pref, preference);
  return status;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (operationDesc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr ||
      Ddesc == nullptr || preference == nullptr || requestedAlgoCount <= 0 ||
      heuristicResultsArray == nullptr || returnAlgoCount == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *returnAlgoCount = 0;
  const Desc desc = load<Desc>(operationDesc);
  const Layout d = load<Layout>(Ddesc);
  Problem problem;
  const cublasStatus_t status =
      check(desc, load<Layout>(Adesc), load<Layout>(Bdesc), load<Layout>(Cdesc), d, problem);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const Algo algo = choose(desc, problem, d.type, load<Preference>(preference));
  if (!alignments_possible(algo)) return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulHeuristicResult_t& result = heuristicResultsArray[0];
  result = {};
  store(&result.algo, algo);
  result.workspaceSize = 0;
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
    const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
    const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
    size_t workspaceSizeInBytes, cudaStream_t /*stream: the work is done before returning*/) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (computeDesc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr ||
      Ddesc == nullptr || alpha == nullptr || beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const Desc desc = load<Desc>(computeDesc);
  const Layout a = load<Layout>(Adesc), b = load<Layout>(Bdesc), c = load<Layout>(Cdesc),
               d = load<Layout>(Ddesc);
  Problem problem;
  const cublasStatus_t status = check(desc, a, b, c, d, problem);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  float alpha_value, beta_value;  // scale type CUDA_R_32F, host pointer mode
  std::memcpy(&alpha_value, alpha, sizeof alpha_value);
  std::memcpy(&beta_value, beta, sizeof beta_value);
  // C is not read when beta is 0, so it may be null then.
  if (A == nullptr || B == nullptr || D == nullptr || (beta_value != 0.0f && C == nullptr) ||
      (problem.epilogue.bias && desc.bias == nullptr) ||
      (problem.epilogue.aux && desc.aux == nullptr)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (C == D && c.ld != d.ld) return CUBLAS_STATUS_INVALID_VALUE;  // in place: one layout
  const Algo chosen =
      algo != nullptr ? load<Algo>(algo) : choose(desc, problem, d.type, Preference{});
  if (chosen.tag != kAlgoTag || chosen.d_type != d.type || !aligned(A, chosen.align_a) ||
      !aligned(B, chosen.align_b) || !aligned(C, chosen.align_c) || !aligned(D, chosen.align_d) ||
      (problem.epilogue.bias && !aligned(desc.bias, chosen.align_bias)) ||
      (problem.epilogue.aux && !aligned(desc.aux, chosen.align_aux)) ||
      (workspaceSizeInBytes > 0 && !aligned(workspace, kDefaultAlignment))) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  multiply(problem, desc, alpha_value, beta_value, A, a, B, b, C, c, D, d);
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
