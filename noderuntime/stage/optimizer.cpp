#include "noderuntime/stage/optimizer.h"

namespace tessel::stage {

double gradient_sum_of_squares(const ParameterLayout& layout, const float* grads) {
  double sum = 0;
  for (const ParameterTensor& t : layout.tensors()) {
    if (t.in_norm) sum += kernels::cpu::sum_of_squares(grads + t.offset, t.size);
  }
  return sum;
}

void adamw_step(const ParameterLayout& layout, float* params, AdamWState& state, const float* grads,
                const kernels::cpu::AdamWHyperparameters& hp, int step, float grad_scale) {
  kernels::cpu::AdamWHyperparameters no_decay = hp;
  no_decay.weight_decay = 0;
  for (const ParameterTensor& t : layout.tensors()) {
    kernels::cpu::adamw_update(params + t.offset, state.m.data() + t.offset,
                               state.v.data() + t.offset, grads + t.offset, t.size,
                               t.decay ? hp : no_decay, step, grad_scale);
  }
}

}  // namespace tessel::stage
