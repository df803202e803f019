#include "noderuntime/stage/optimizer.h"

namespace tessel::stage {

AdamWState new_adamw_state(const GptChunk& chunk) {
  const size_t n = chunk.params().size();
  return {std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f)};
}

double gradient_sum_of_squares(const GptChunk& chunk) {
  double sum = 0;
  for (const ParameterTensor& t : chunk.layout().tensors()) {
    if (t.in_norm) sum += kernels::cpu::sum_of_squares(chunk.grads().data() + t.offset, t.size);
  }
  return sum;
}

void adamw_step(GptChunk& chunk, AdamWState& state, const kernels::cpu::AdamWHyperparameters& hp,
                int step, float grad_scale) {
  kernels::cpu::AdamWHyperparameters no_decay = hp;
  no_decay.weight_decay = 0;
  for (const ParameterTensor& t : chunk.layout().tensors()) {
    kernels::cpu::adamw_update(chunk.params().data() + t.offset, state.m.data() + t.offset,
                               state.v.data() + t.offset, chunk.grads().data() + t.offset, t.size,
                               t.decay ? hp : no_decay, step, grad_scale);
  }
}

}  // namespace tessel::stage
