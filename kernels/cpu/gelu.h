// GELU, GPT-2's tanh approximation:
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// elementwise over N floats. Backward accumulates (+=) into dinp and needs the forward input.
// tanh comes from simd::exp4 (libm's tanhf does not vectorise and costs ~20 ns a call); values
// are within 1e-6 (absolute plus relative) of the formula evaluated in double.
#pragma once

#include <cstdint>

namespace tessel::kernels::cpu {

void gelu_forward(float* out,        // (N)
                  const float* inp,  // (N)
                  int64_t N);

void gelu_backward(float* dinp,        // (N) +=
                   const float* inp,   // (N) the forward input
                   const float* dout,  // (N)
                   int64_t N);

}  // namespace tessel::kernels::cpu
