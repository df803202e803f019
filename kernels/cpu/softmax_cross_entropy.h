// The LM head's loss, fused: softmax over the vocabulary, cross-entropy against the target
// token, and the gradient of the logits, in one pass over each row of logits.
//   losses[b,t]    = logsumexp(logits[b,t,:]) - logits[b,t,target]
//   dlogits[b,t,:] = (softmax(logits[b,t,:]) - onehot(target)) * dloss
// dloss is d(total loss)/d(losses[b,t]): 1/N for the mean over N counted positions.
// dlogits is overwritten, not accumulated (it is the start of the backward pass), and may be
// the logits buffer itself (in place: no second B*T*V buffer), or nullptr for the loss only.
#pragma once

namespace tessel::kernels::cpu {

enum class IgnoreTarget {
  kNone,      // every target must be in [0, V)
  kMinusOne,  // a target of -1 is padding: loss 0 and a zero gradient row
};

// Throws std::invalid_argument for a null pointer (but dlogits), a shape below 1 or a target
// outside [0, V) that is not an ignored -1.
void softmax_cross_entropy(float* losses,        // (B, T)
                           float* dlogits,       // (B, T, V) overwritten, or nullptr
                           const float* logits,  // (B, T, V)
                           const int* targets,   // (B, T)
                           float dloss, int B, int T, int V, IgnoreTarget ignore);

}  // namespace tessel::kernels::cpu
