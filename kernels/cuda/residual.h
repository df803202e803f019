// CUDA twin of kernels/cpu/residual.h in bf16 (sums in fp32, rounded once). Backward accumulates
// (+=) dout into both gradients. residual_layernorm_forward (layernorm.h) fuses the forward add
// with the layernorm that follows it in a transformer block.
#pragma once

#include <cstdint>

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda {

void residual_forward(bf16* out,         // (N)
                      const bf16* inp1,  // (N)
                      const bf16* inp2,  // (N)
                      int64_t N, Context& ctx);

void residual_backward(bf16* dinp1,       // (N) +=
                       bf16* dinp2,       // (N) +=
                       const bf16* dout,  // (N)
                       int64_t N, Context& ctx);

}  // namespace tessel::kernels::cuda
