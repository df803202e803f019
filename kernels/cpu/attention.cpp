#include "kernels/cpu/attention.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/argument_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threading.h"

namespace tessel::kernels::cpu {
namespace {

using simd::f32x4;

void check_shape(const char* op, int B, int T, int C, int NH) {
  detail::require_positive(B, op, "B");
  detail::require_positive(T, op, "T");
  detail::require_positive(C, op, "C");
  detail::require_positive(NH, op, "NH");
  if (C % NH != 0) [[unlikely]] {
    detail::throw_invalid(
        op, "C=" + std::to_string(C) + " is not a multiple of NH=" + std::to_string(NH));
  }
}

// Turns the scores row[0..n) into softmax probabilities in place.
void softmax_in_place(float* row, int64_t n) {
  float max_score = row[0];
  for (int64_t i = 1; i < n; ++i) max_score = row[i] > max_score ? row[i] : max_score;
  const f32x4 shift = simd::splat4(max_score);
  f32x4 acc{};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const f32x4 e = simd::exp4(simd::load4(row + i) - shift);
    simd::store4(row + i, e);
    acc += e;
  }
  float sum = simd::sum_lanes(acc);
  if (const int tail = int(n - i); tail > 0) {
    const f32x4 e = simd::exp4(simd::load_n(row + i, tail) - shift);
    simd::store_n(row + i, e, tail);
    for (int j = 0; j < tail; ++j) sum += e[j];
  }
  const float inv_sum = 1.0f / sum;
  for (i = 0; i < n; ++i) row[i] *= inv_sum;
}

}  // namespace

void attention_forward(float* out, float* att, const float* inp, int B, int T, int C, int NH) {
  constexpr const char* kOp = "attention_forward";
  detail::require_pointer(out, kOp, "out");
  detail::require_pointer(att, kOp, "att");
  detail::require_pointer(inp, kOp, "inp");
  check_shape(kOp, B, T, C, NH);
  const int64_t HS = C / NH;
  const int64_t C3 = 3 * int64_t(C);
  const float scale = 1.0f / std::sqrt(float(HS));
  // One chunk per (b, h): it writes att[b,h] and the head's columns of out only.
  parallel_for(int64_t(B) * NH, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / NH;
      const int64_t h = bh % NH;
      const float* inp_b = inp + b * T * C3;
      for (int64_t t = 0; t < T; ++t) {
        const float* q = inp_b + t * C3 + h * HS;
        float* att_row = att + (bh * T + t) * T;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          att_row[t2] = simd::dot(q, inp_b + t2 * C3 + C + h * HS, HS) * scale;
        }
        softmax_in_place(att_row, t + 1);
        for (int64_t t2 = t + 1; t2 < T; ++t2) att_row[t2] = 0.0f;
        float* out_row = out + (b * T + t) * C + h * HS;
        for (int64_t i = 0; i < HS; ++i) out_row[i] = 0.0f;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          simd::axpy(out_row, att_row[t2], inp_b + t2 * C3 + 2 * C + h * HS, HS);
        }
      }
    }
  });
}

void attention_backward(float* dinp, const float* dout, const float* inp, const float* att, int B,
                        int T, int C, int NH) {
  constexpr const char* kOp = "attention_backward";
  detail::require_pointer(dinp, kOp, "dinp");
  detail::require_pointer(dout, kOp, "dout");
  detail::require_pointer(inp, kOp, "inp");
  detail::require_pointer(att, kOp, "att");
  check_shape(kOp, B, T, C, NH);
  const int64_t HS = C / NH;
  const int64_t C3 = 3 * int64_t(C);
  const float scale = 1.0f / std::sqrt(float(HS));
  // One chunk per (b, h): dk and dv of a position collect from every later query of the same
  // head, so a head's rows run on one thread, in order of t.
  parallel_for(int64_t(B) * NH, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> datt(T);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / NH;
      const int64_t h = bh % NH;
      const float* inp_b = inp + b * T * C3;
      float* dinp_b = dinp + b * T * C3;
      for (int64_t t = 0; t < T; ++t) {
        const float* att_row = att + (bh * T + t) * T;
        const float* dout_row = dout + (b * T + t) * C + h * HS;
        const float* q = inp_b + t * C3 + h * HS;
        float* dq = dinp_b + t * C3 + h * HS;
        // out = sum_t2 att v_t2
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          datt[t2] = simd::dot(dout_row, inp_b + t2 * C3 + 2 * C + h * HS, HS);
          simd::axpy(dinp_b + t2 * C3 + 2 * C + h * HS, att_row[t2], dout_row, HS);
        }
        // softmax: dscore = att (datt - sum_j att_j datt_j); score = q . k scale
        const float att_datt = simd::dot(att_row, datt.data(), t + 1);
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float dscore = att_row[t2] * (datt[t2] - att_datt) * scale;
          simd::axpy(dq, dscore, inp_b + t2 * C3 + C + h * HS, HS);
          simd::axpy(dinp_b + t2 * C3 + C + h * HS, dscore, q, HS);
        }
      }
    }
  });
}

}  // namespace tessel::kernels::cpu
