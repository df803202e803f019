// CUDA twin of kernels/cpu/matmul.h through cuBLASLt: out = inp @ weight^T + bias, weight (OC, C).
// bf16 operands, fp32 accumulation (CUBLAS_COMPUTE_32F), bf16 output; the bias (and GELU, in
// matmul_gelu_forward) is applied in cuBLASLt's epilogue, so the output is written once.
//
// Backward: dinp (bf16) += dout @ weight and dweight (fp32, the master gradient) += dout^T @ inp,
// each one GEMM with beta = 1; dbias (fp32) += the column sums of dout, a deterministic two-pass
// reduction (fixed blocks of rows, partial sums added in block order).
#pragma once

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda {

// Throws std::invalid_argument for a null pointer (bias may be null) or a shape below 1.
void matmul_forward(bf16* out,           // (B, T, OC)
                    const bf16* inp,     // (B, T, C)
                    const bf16* weight,  // (OC, C)
                    const bf16* bias,    // (OC), or nullptr for none
                    int B, int T, int C, int OC, Context& ctx);

// out = gelu(inp @ weight^T + bias), keeping pre_gelu = inp @ weight^T + bias for gelu_backward:
// the fc layer of a GPT MLP as one GEMM (cuBLASLt's GELU_AUX epilogue, which is GPT-2's tanh
// GELU). The epilogue needs OC to be a multiple of 8; other shapes take a GEMM then gelu_forward.
void matmul_gelu_forward(bf16* out,           // (B, T, OC)
                         bf16* pre_gelu,      // (B, T, OC)
                         const bf16* inp,     // (B, T, C)
                         const bf16* weight,  // (OC, C)
                         const bf16* bias,    // (OC), or nullptr for none
                         int B, int T, int C, int OC, Context& ctx);

// Scratch for dbias: OC floats per block of rows, from ctx.scratch().
void matmul_backward(bf16* dinp,          // (B, T, C) +=
                     float* dweight,      // (OC, C) +=
                     float* dbias,        // (OC) +=, or nullptr when the layer has no bias
                     const bf16* dout,    // (B, T, OC)
                     const bf16* inp,     // (B, T, C)
                     const bf16* weight,  // (OC, C)
                     int B, int T, int C, int OC, Context& ctx);

}  // namespace tessel::kernels::cuda
