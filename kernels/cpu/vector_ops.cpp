#include "kernels/cpu/vector_ops.h"

#include <algorithm>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu {

void zero(float* x, int64_t N) {
  detail::require_pointer(x, "zero", "x");
  detail::require_positive(N, "zero", "N");
  parallel_for(N, kChunkElements,
               [&](int64_t begin, int64_t end) { std::fill(x + begin, x + end, 0.0f); });
}

void scaled_add(float* y, const float* x, float alpha, int64_t N) {
  detail::require_pointer(y, "scaled_add", "y");
  detail::require_pointer(x, "scaled_add", "x");
  detail::require_positive(N, "scaled_add", "N");
  parallel_for(N, kChunkElements, [&](int64_t begin, int64_t end) {
    simd::axpy(y + begin, alpha, x + begin, end - begin);
  });
}

}  // namespace tessel::kernels::cpu
