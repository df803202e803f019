// The CPU optimizer step of one chunk: AdamW (kernels/cpu/adamw.h) tensor by tensor, weight decay
// on the matrices only, after the gradients have been clipped by the global norm of the whole
// model (all stages), which the runtime all-reduces. The CUDA backend does the same with the
// CUDA twins.
#pragma once

#include <vector>

#include "kernels/cpu/adamw.h"
#include "noderuntime/stage/chunk_model.h"
#include "noderuntime/stage/parameter_layout.h"

namespace tessel::stage {

struct AdamWState {
  std::vector<float> m;  // first moments, the chunk's parameter layout
  std::vector<float> v;  // second moments
};

// Sum of squared gradients over the chunk's tensors counted in the global norm (all but the
// lm_head copy of the tied table), tensor by tensor in layout order, in double.
double gradient_sum_of_squares(const ParameterLayout& layout, const float* grads);

// One AdamW update of every parameter; step counts from 1, grad_scale is the clipping factor.
void adamw_step(const ParameterLayout& layout, float* params, AdamWState& state, const float* grads,
                const kernels::cpu::AdamWHyperparameters& hp, int step, float grad_scale);

// One plain SGD update: params -= lr (grad_scale grads + weight_decay params), weight decay on the
// tensors marked decay (hp.learning_rate and hp.weight_decay; the betas and eps are AdamW's).
void sgd_step(const ParameterLayout& layout, float* params, const float* grads,
              const kernels::cpu::AdamWHyperparameters& hp, float grad_scale);

// The same on a chunk of any backend, through its host state: the gradients of every bucket
// (ChunkModel::gradients_for_reduce), the parameters updated and written back, the moments kept.
void sgd_step(ChunkModel& chunk, const kernels::cpu::AdamWHyperparameters& hp, float grad_scale);

}  // namespace tessel::stage
