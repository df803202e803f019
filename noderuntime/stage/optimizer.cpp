#include "noderuntime/stage/optimizer.h"

#include <cstring>
#include <stdexcept>

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

void sgd_step(const ParameterLayout& layout, float* params, const float* grads,
              const kernels::cpu::AdamWHyperparameters& hp, float grad_scale) {
  const float lr = hp.learning_rate;
  for (const ParameterTensor& t : layout.tensors()) {
    const float decay = t.decay ? hp.weight_decay : 0.0f;
    float* p = params + t.offset;
    const float* g = grads + t.offset;
    for (int64_t i = 0; i < t.size; ++i) p[i] -= lr * (grad_scale * g[i] + decay * p[i]);
  }
}

void sgd_step(ChunkModel& chunk, const kernels::cpu::AdamWHyperparameters& hp, float grad_scale) {
  const ParameterLayout& layout = chunk.layout();
  const auto n = static_cast<size_t>(layout.total());
  std::vector<float> grads(n, 0.0f);
  size_t covered = 0;
  for (size_t b = 0; b < layout.buckets().size(); ++b) {
    const GradientBucket& bucket = layout.buckets()[b];
    const std::span<float> g = chunk.gradients_for_reduce(static_cast<int>(b));
    std::memcpy(grads.data() + bucket.offset, g.data(), g.size() * sizeof(float));
    covered += g.size();
  }
  if (covered != n) {
    throw std::logic_error("sgd step: the gradient buckets cover " + std::to_string(covered) +
                           " of the chunk's " + std::to_string(n) + " parameters");
  }
  const ConstHostState now = chunk.state_for_reading();
  const HostState out = chunk.state_for_writing();
  if (out.params != now.params) std::memcpy(out.params, now.params, n * sizeof(float));
  if (out.m != now.m) std::memcpy(out.m, now.m, n * sizeof(float));
  if (out.v != now.v) std::memcpy(out.v, now.v, n * sizeof(float));
  sgd_step(layout, out.params, grads.data(), hp, grad_scale);
  chunk.state_written();
}

}  // namespace tessel::stage
