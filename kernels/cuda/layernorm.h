// CUDA twin of kernels/cpu/layernorm.h: bf16 input, output, weight and bias; the statistics
// (mean, rstd, B*T floats each) in fp32, as is all arithmetic. eps is the CPU twin's
// kLayerNormEps.
//
// Fused with the residual add: residual_layernorm_forward computes a transformer block's
// "x = inp1 + inp2; out = layernorm(x)" in one pass, writing x (the residual stream) and out.
// In the backward pass the fusion is the += of layernorm_backward: dinp is the residual stream's
// gradient, to which the layernorm adds its part without a separate residual_backward.
//
// The parameter gradients are fp32 and deterministic: fixed blocks of rows write partial column
// sums, added in block order.
#pragma once

#include "kernels/cpu/layernorm.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda {

using cpu::kLayerNormEps;

void layernorm_forward(bf16* out,           // (B, T, C)
                       float* mean,         // (B, T)
                       float* rstd,         // (B, T)
                       const bf16* inp,     // (B, T, C)
                       const bf16* weight,  // (C)
                       const bf16* bias,    // (C)
                       int B, int T, int C, Context& ctx);

// residual = inp1 + inp2 (rounded to bf16: the value normalised and kept for the backward pass),
// out = layernorm(residual).
void residual_layernorm_forward(bf16* residual,      // (B, T, C)
                                bf16* out,           // (B, T, C)
                                float* mean,         // (B, T)
                                float* rstd,         // (B, T)
                                const bf16* inp1,    // (B, T, C)
                                const bf16* inp2,    // (B, T, C)
                                const bf16* weight,  // (C)
                                const bf16* bias,    // (C)
                                int B, int T, int C, Context& ctx);

// Scratch: 2 * C floats per 32 rows, from ctx.scratch().
void layernorm_backward(bf16* dinp,          // (B, T, C) +=
                        float* dweight,      // (C) +=
                        float* dbias,        // (C) +=
                        const bf16* dout,    // (B, T, C)
                        const bf16* inp,     // (B, T, C) the forward input (the residual)
                        const bf16* weight,  // (C)
                        const float* mean,   // (B, T) from the forward pass
                        const float* rstd,   // (B, T) from the forward pass
                        int B, int T, int C, Context& ctx);

}  // namespace tessel::kernels::cuda
