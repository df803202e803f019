// CUDA twin of kernels/cpu/attention.h: causal multi-head self-attention over bf16 q, k, v laid
// out as the CPU twin's (inp (B, T, 3C) = q | k | v, head h in columns h*HS .. h*HS+HS-1).
//
// A flash-attention style kernel on the tensor cores (mma.sync bf16, fp32 accumulation): each
// block keeps a tile of queries and streams tiles of keys and values through shared memory with
// an online softmax, so the T x T matrix never reaches global memory. In place of the CPU twin's
// att (B, NH, T, T) the forward keeps lse (B, NH, T), the log-sum-exp of each query's scaled
// scores; the backward recomputes the probabilities from it, tile by tile, one block per tile of
// keys and values, adding dq into an fp32 scratch buffer with atomics (so dq's rounding may
// differ between runs; dk and dv are written by one block each). A warp skips a tile wholly past
// the causal mask, and masks only the tiles that cross it.
//
// Supported: HS = C / NH of 64 or 128 (GPT-2 124M has 64, GPT-3 1.3B 128), any T (tiles at the
// end are masked), inp, out, dout and dinp 16-byte aligned. Throws std::invalid_argument
// otherwise.
#pragma once

#include "kernels/cuda/bf16.h"
#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda {

void attention_forward(bf16* out,   // (B, T, C)
                       float* lse,  // (B, NH, T) log-sum-exp of the scaled scores, for backward
                       const bf16* inp,  // (B, T, 3C) q, k, v
                       int B, int T, int C, int NH, Context& ctx);

// Scratch: B*T*C + 2*B*NH*ceil(T/64)*64 floats (dq in fp32, lse*log2(e) and rowsum(dout * out)
// per query padded to whole tiles), from ctx.scratch().
void attention_backward(bf16* dinp,        // (B, T, 3C) += (dq, dk, dv)
                        const bf16* dout,  // (B, T, C)
                        const bf16* inp,   // (B, T, 3C) the forward input
                        const bf16* out,   // (B, T, C) the forward output
                        const float* lse,  // (B, NH, T) from attention_forward
                        int B, int T, int C, int NH, Context& ctx);

}  // namespace tessel::kernels::cuda
