// CUDA twin of kernels/cpu/adamw.h over the fp32 master weights and optimizer state, with the
// gradient clipping fused in: grad_scale (clip_scale(global norm, max_norm), 1 for no clipping)
// multiplies each gradient inside the update, so clipping costs no pass of its own. The same
// update also writes the bf16 copy of the weights that the forward pass reads.
//
// The global norm of a model split over pipeline stages is the root of the sum of every stage's
// sum_of_squares, so the stage runtime reads each stage's sum on the host (one 8-byte copy per
// step), exchanges them and calls clip_scale there, as the CPU runtime does.
#pragma once

#include <cstdint>

#include "kernels/cpu/adamw.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/context.h"

namespace tessel::kernels::cuda {

using cpu::AdamWHyperparameters;
using cpu::clip_scale;

// The CPU twin's update and argument checks (it throws for a NaN grad_scale: a diverged step
// fails loudly). params_bf16 receives bf16(params) after the update, or is nullptr.
void adamw_update(float* params,       // (N)
                  float* m,            // (N) first moment, zero before step 1
                  float* v,            // (N) second moment, zero before step 1
                  const float* grads,  // (N)
                  int64_t N, const AdamWHyperparameters& hp, int step, float grad_scale,
                  bf16* params_bf16,  // (N), or nullptr
                  Context& ctx);

// sum_i x[i]^2, each square and sum in double: fixed blocks of elements, block sums added in
// order, so the result does not change between runs. Waits for ctx's stream (the result is
// returned to the host).
double sum_of_squares(const float* x,  // (N)
                      int64_t N, Context& ctx);

// sqrt(sum_of_squares(x, N)).
double global_norm(const float* x,  // (N)
                   int64_t N, Context& ctx);

}  // namespace tessel::kernels::cuda
