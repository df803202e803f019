// Causal multi-head self-attention (GPT-2), between the QKV projection and the output projection.
//
// inp (B, T, 3C) holds q, k and v side by side: q = inp[b,t,0:C], k = inp[b,t,C:2C],
// v = inp[b,t,2C:3C]; head h uses columns h*HS .. h*HS+HS-1 of each, HS = C / NH.
//   att[b,h,t,:] = softmax_{t2 <= t}(q_t . k_t2 / sqrt(HS)),  out[b,t,h*HS:] = sum_t2 att v_t2
//
// Buffers: the forward pass keeps the softmax probabilities for the backward pass in att,
// B*NH*T*T floats (zero above the diagonal): 786 KB per layer for GPT-2 124M at B=4, T=64;
// 201 MB per layer at B=4, T=1024. The backward pass needs no other scratch (it recomputes
// each row's score gradients in a T-float buffer of its own). Gradients accumulate (+=) into dinp.
#pragma once

namespace tessel::kernels::cpu {

// Throws std::invalid_argument for a null pointer, a shape below 1, or C not a multiple of NH.
void attention_forward(float* out,        // (B, T, C)
                       float* att,        // (B, NH, T, T) softmax probabilities, for backward
                       const float* inp,  // (B, T, 3C) q, k, v
                       int B, int T, int C, int NH);

void attention_backward(float* dinp,        // (B, T, 3C) += (dq, dk, dv)
                        const float* dout,  // (B, T, C)
                        const float* inp,   // (B, T, 3C) the forward input
                        const float* att,   // (B, NH, T, T) from attention_forward
                        int B, int T, int C, int NH);

}  // namespace tessel::kernels::cpu
