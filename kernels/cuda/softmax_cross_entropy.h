// CUDA twin of kernels/cpu/softmax_cross_entropy.h: the LM head's softmax, cross-entropy and
// logits gradient in one kernel, one block per row. bf16 logits and dlogits, fp32 losses and
// arithmetic. The row's maximum and sum of exponentials come from one read (an online softmax);
// the gradient pass reads the row again, mostly from L2.
//   losses[b,t]    = logsumexp(logits[b,t,:]) - logits[b,t,target]
//   dlogits[b,t,:] = (softmax(logits[b,t,:]) - onehot(target)) * dloss
// dlogits is overwritten, may be logits itself (in place), or nullptr for the loss only.
//
// Targets live on the device and are not checked on the host: a target outside [0, V) that is
// not an ignored -1 gives a NaN loss and a NaN gradient row.
#pragma once

#include "kernels/cpu/softmax_cross_entropy.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda {

using cpu::IgnoreTarget;

void softmax_cross_entropy(float* losses,       // (B, T)
                           bf16* dlogits,       // (B, T, V) overwritten, or nullptr
                           const bf16* logits,  // (B, T, V)
                           const int* targets,  // (B, T)
                           float dloss, int B, int T, int V, IgnoreTarget ignore, Context& ctx);

}  // namespace tessel::kernels::cuda
