// Layer normalisation over the last axis (GPT-2: eps 1e-5, biased variance):
//   out[r,:] = (inp[r,:] - mean[r]) * rstd[r] * weight + bias,  rstd = 1 / sqrt(var + eps)
// for each of the B*T rows. The forward pass keeps mean and rstd (B*T floats each) for the
// backward pass. Gradients accumulate (+=) into dinp, dweight and dbias.
#pragma once

namespace tessel::kernels::cpu {

inline constexpr float kLayerNormEps = 1e-5f;

void layernorm_forward(float* out,           // (B, T, C)
                       float* mean,          // (B, T)
                       float* rstd,          // (B, T)
                       const float* inp,     // (B, T, C)
                       const float* weight,  // (C)
                       const float* bias,    // (C)
                       int B, int T, int C);

void layernorm_backward(float* dinp,          // (B, T, C) +=
                        float* dweight,       // (C) +=
                        float* dbias,         // (C) +=
                        const float* dout,    // (B, T, C)
                        const float* inp,     // (B, T, C)
                        const float* weight,  // (C)
                        const float* mean,    // (B, T) from the forward pass
                        const float* rstd,    // (B, T) from the forward pass
                        int B, int T, int C);

}  // namespace tessel::kernels::cpu
