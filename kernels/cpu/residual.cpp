#include "kernels/cpu/residual.h"

#include "kernels/cpu/argument_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu {

using simd::load4;
using simd::store4;

void residual_forward(float* out, const float* inp1, const float* inp2, int64_t N) {
  constexpr const char* kOp = "residual_forward";
  detail::require_pointer(out, kOp, "out");
  detail::require_pointer(inp1, kOp, "inp1");
  detail::require_pointer(inp2, kOp, "inp2");
  detail::require_positive(N, kOp, "N");
  parallel_for(N, kChunkElements, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) store4(out + i, load4(inp1 + i) + load4(inp2 + i));
    for (; i < end; ++i) out[i] = inp1[i] + inp2[i];
  });
}

void residual_backward(float* dinp1, float* dinp2, const float* dout, int64_t N) {
  constexpr const char* kOp = "residual_backward";
  detail::require_pointer(dinp1, kOp, "dinp1");
  detail::require_pointer(dinp2, kOp, "dinp2");
  detail::require_pointer(dout, kOp, "dout");
  detail::require_positive(N, kOp, "N");
  parallel_for(N, kChunkElements, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) {
      const auto g = load4(dout + i);
      store4(dinp1 + i, load4(dinp1 + i) + g);
      store4(dinp2 + i, load4(dinp2 + i) + g);
    }
    for (; i < end; ++i) {
      dinp1[i] += dout[i];
      dinp2[i] += dout[i];
    }
  });
}

}  // namespace tessel::kernels::cpu
