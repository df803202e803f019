// Token + position embedding (GPT-2's first op): out[b,t,:] = wte[inp[b,t],:] + wpe[t,:].
// Backward accumulates (+=) into dwte and dwpe, like every gradient in kernels/cpu: the caller
// zeroes gradient buffers once per step, so micro-batches and tied weights (GPT-2's wte is
// also the LM head) add up in place.
#pragma once

namespace tessel::kernels::cpu {

// Throws std::invalid_argument for a null pointer, a shape below 1 or a token outside [0, V).
void encoder_forward(float* out,        // (B, T, C)
                     const int* inp,    // (B, T) token ids
                     const float* wte,  // (V, C)
                     const float* wpe,  // (maxT, C), maxT >= T: rows 0..T-1 are read
                     int B, int T, int C, int V);

void encoder_backward(float* dwte,        // (V, C) +=
                      float* dwpe,        // (maxT, C) += on rows 0..T-1
                      const float* dout,  // (B, T, C)
                      const int* inp,     // (B, T)
                      int B, int T, int C, int V);

}  // namespace tessel::kernels::cpu
