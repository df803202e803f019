// Small whole-buffer helpers for the stage runtime: zeroing gradient buffers at the start of a
// step, and y += alpha x (averaging or accumulating gradients across micro-batches and replicas).
#pragma once

#include <cstdint>

namespace tessel::kernels::cpu {

void zero(float* x,  // (N)
          int64_t N);

// y += alpha * x
void scaled_add(float* y,        // (N)
                const float* x,  // (N)
                float alpha, int64_t N);

}  // namespace tessel::kernels::cpu
