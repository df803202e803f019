// CUDA twin of kernels/cpu/gelu.h: GPT-2's tanh-approximated GELU over bf16, computed in fp32.
// Backward accumulates (+=) into dinp. matmul_gelu_forward (matmul.h) fuses the forward into the
// GEMM's epilogue; the backward stays this separate pass.
#pragma once

#include <cstdint>

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda {

void gelu_forward(bf16* out,        // (N)
                  const bf16* inp,  // (N)
                  int64_t N, Context& ctx);

void gelu_backward(bf16* dinp,        // (N) +=
                   const bf16* inp,   // (N) the forward input
                   const bf16* dout,  // (N)
                   int64_t N, Context& ctx);

}  // namespace tessel::kernels::cuda
