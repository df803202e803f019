#include "kernels/cpu/encoder.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu {
namespace {

void check_shape(const char* op, int B, int T, int C, int V) {
  detail::require_positive(B, op, "B");
  detail::require_positive(T, op, "T");
  detail::require_positive(C, op, "C");
  detail::require_positive(V, op, "V");
}

// One pass over B*T ints: cheap next to the B*T*C floats the kernels move.
void check_tokens(const char* op, const int* inp, int64_t n, int V) {
  for (int64_t i = 0; i < n; ++i) {
    if (inp[i] < 0 || inp[i] >= V) [[unlikely]] {
      detail::throw_invalid(op, "inp[" + std::to_string(i) + "]=" + std::to_string(inp[i]) +
                                    " is outside [0, V=" + std::to_string(V) + ")");
    }
  }
}

}  // namespace

void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                     int C, int V) {
  constexpr const char* kOp = "encoder_forward";
  detail::require_pointer(out, kOp, "out");
  detail::require_pointer(inp, kOp, "inp");
  detail::require_pointer(wte, kOp, "wte");
  detail::require_pointer(wpe, kOp, "wpe");
  check_shape(kOp, B, T, C, V);
  check_tokens(kOp, inp, int64_t(B) * T, V);
  parallel_for(int64_t(B) * T, rows_per_chunk(C), [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
      float* out_bt = out + bt * C;
      const float* wte_ix = wte + int64_t(inp[bt]) * C;
      const float* wpe_t = wpe + (bt % T) * C;
      for (int c = 0; c < C; ++c) out_bt[c] = wte_ix[c] + wpe_t[c];
    }
  });
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                      int C, int V) {
  constexpr const char* kOp = "encoder_backward";
  detail::require_pointer(dwte, kOp, "dwte");
  detail::require_pointer(dwpe, kOp, "dwpe");
  detail::require_pointer(dout, kOp, "dout");
  detail::require_pointer(inp, kOp, "inp");
  check_shape(kOp, B, T, C, V);
  check_tokens(kOp, inp, int64_t(B) * T, V);
  // Repeated tokens scatter into the same row of dwte: each chunk owns a block of columns and
  // walks the positions in order, so no two threads touch one float and the sum order is fixed.
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
  parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    const int64_t c0 = begin * kColumnBlock;
    const int64_t c1 = std::min<int64_t>(C, end * kColumnBlock);
    for (int64_t bt = 0; bt < int64_t(B) * T; ++bt) {
      const float* dout_bt = dout + bt * C;
      float* dwte_ix = dwte + int64_t(inp[bt]) * C;
      float* dwpe_t = dwpe + (bt % T) * C;
      for (int64_t c = c0; c < c1; ++c) {
        dwte_ix[c] += dout_bt[c];
        dwpe_t[c] += dout_bt[c];
      }
    }
  });
}

}  // namespace tessel::kernels::cpu
