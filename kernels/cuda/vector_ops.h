// CUDA twins of kernels/cpu/vector_ops.h over fp32 gradient buffers, and the fp32 -> bf16 copy
// that makes the forward pass's weights from the fp32 master weights (after initialisation or a
// checkpoint load; adamw_update keeps it current afterwards).
#pragma once

#include <cstdint>

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda {

void zero(float* x,  // (N)
          int64_t N, Context& ctx);

// y += alpha * x
void scaled_add(float* y,        // (N)
                const float* x,  // (N)
                float alpha, int64_t N, Context& ctx);

// out = bf16(inp), rounded to nearest even.
void copy_to_bf16(bf16* out,         // (N)
                  const float* inp,  // (N)
                  int64_t N, Context& ctx);

}  // namespace tessel::kernels::cuda
