// Residual connection: out = inp1 + inp2, elementwise over N floats. Backward accumulates (+=)
// dout into both dinp1 and dinp2.
#pragma once

#include <cstdint>

namespace tessel::kernels::cpu {

void residual_forward(float* out,         // (N)
                      const float* inp1,  // (N)
                      const float* inp2,  // (N)
                      int64_t N);

void residual_backward(float* dinp1,       // (N) +=
                       float* dinp2,       // (N) +=
                       const float* dout,  // (N)
                       int64_t N);

}  // namespace tessel::kernels::cpu
