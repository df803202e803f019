// CUDA twin of kernels/cpu/encoder.h: out[b,t,:] = wte[inp[b,t],:] + wpe[t,:], bf16 tables and
// output, the sum in fp32. The backward accumulates (+=) into fp32 gradients and is
// deterministic: positions are sorted by token (a stable radix sort), and each row of dwte is
// summed over its positions in order by one thread per column, with no atomics.
//
// Token ids live on the device, so they are not checked on the host as the CPU twin does: a
// token outside [0, V) makes a NaN row in the forward output (so the loss shows it) and is
// skipped by the backward.
#pragma once

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda {

void encoder_forward(bf16* out,        // (B, T, C)
                     const int* inp,   // (B, T) token ids
                     const bf16* wte,  // (V, C)
                     const bf16* wpe,  // (maxT, C), maxT >= T: rows 0..T-1 are read
                     int B, int T, int C, int V, Context& ctx);

// Scratch: about 16 bytes per position, from ctx.scratch().
void encoder_backward(float* dwte,       // (V, C) +=
                      float* dwpe,       // (maxT, C) += on rows 0..T-1
                      const bf16* dout,  // (B, T, C)
                      const int* inp,    // (B, T)
                      int B, int T, int C, int V, Context& ctx);

}  // namespace tessel::kernels::cuda
