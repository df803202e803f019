// Initialisation from a seed, independent of how the model is partitioned: every parameter
// tensor is drawn from its own counter-based stream keyed by (seed, init key), and element i
// of a tensor depends on the key and i only. The key is the tensor's global name, which holds
// the global layer index ("h.7.mlp.fc.weight"), so any partition of the model into stages and
// chunks builds bit-identical weights, and the last stage's lm_head copy (keyed "wte.weight")
// starts bit-identical to the first stage's wte. GPT-2's scheme: matrices normal(0, 0.02), the
// residual projections scaled by 1/sqrt(2 L), biases 0, layernorm gains 1.
#pragma once

#include <cstdint>
#include <string_view>

#include "noderuntime/stage/parameter_layout.h"

namespace tessel::stage {

// The stream of one tensor: a 64-bit mix of the seed and the key's bytes.
uint64_t parameter_stream(uint64_t seed, std::string_view key);

// Element `index` of the standard normal sequence of `stream` (Box-Muller on two hashed
// counters per pair of elements, computed in double).
float standard_normal_at(uint64_t stream, int64_t index);

// Fills params (layout.total() floats) with the chunk's initial weights.
void initialize_parameters(const ParameterLayout& layout, uint64_t seed, float* params);

}  // namespace tessel::stage
