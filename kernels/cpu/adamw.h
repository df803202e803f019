// The optimizer: AdamW (decoupled weight decay) with bias correction, and gradient clipping by
// global norm. For step t >= 1, with g = grad_scale * grads:
//   m = beta1 m + (1 - beta1) g           v = beta2 v + (1 - beta2) g^2
//   params -= lr (m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay params)
// Clipping: grad_scale = clip_scale(global norm, max_norm). The global norm of a model split
// over pipeline stages is sqrt of the sum of every stage's sum_of_squares; each is computed in
// double over fixed 16384-float blocks added in order, so it does not depend on the threads.
// Weight decay applies to every element passed: call once per group (decayed matrices, then
// biases and layernorm parameters with weight_decay 0) over contiguous parameter ranges.
#pragma once

#include <cstdint>

namespace tessel::kernels::cpu {

struct AdamWHyperparameters {
  float learning_rate = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// Throws std::invalid_argument for a null pointer, N < 1, step < 1, a negative or non-finite
// learning rate, weight decay or grad_scale, beta outside [0, 1), or eps <= 0.
void adamw_update(float* params,       // (N)
                  float* m,            // (N) first moment, zero before step 1
                  float* v,            // (N) second moment, zero before step 1
                  const float* grads,  // (N)
                  int64_t N, const AdamWHyperparameters& hp, int step, float grad_scale);

// sum_i x[i]^2 in double.
double sum_of_squares(const float* x,  // (N)
                      int64_t N);

// sqrt(sum_of_squares(x, N)).
double global_norm(const float* x,  // (N)
                   int64_t N);

// min(1, max_norm / norm): the grad_scale that clips a gradient of global norm `norm` to
// max_norm. A NaN or infinite norm gives a NaN scale, which adamw_update rejects: a diverged
// step fails loudly instead of being clipped to nothing. Throws std::invalid_argument for a
// negative norm or a max_norm that is not positive and finite.
float clip_scale(double norm, float max_norm);

namespace detail {
// The checks adamw_update makes of its scalars, with its messages; the CUDA twin makes the same.
void check_adamw_scalars(const char* op, const AdamWHyperparameters& hp, int step,
                         float grad_scale);
}  // namespace detail

}  // namespace tessel::kernels::cpu
