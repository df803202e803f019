// The 16-bit type of weights and activations on the GPU: bfloat16 (8 exponent bits like fp32, so
// no loss scaling; 8 significant bits, so about 2-3 correct decimal digits, 0.4% relative).
#pragma once

#include <cuda_bf16.h>

namespace tessel::kernels::cuda {

using bf16 = __nv_bfloat16;

}  // namespace tessel::kernels::cuda
