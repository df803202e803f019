#include "placement/layer_split.h"

#include <algorithm>
#include <limits>

namespace tessel::placement {

double stage_memory_bytes(const Workload& w, int layers, bool first, bool last, double in_flight) {
  return w.state_bytes(layers, first, last) + in_flight * w.activation_bytes_in_flight(layers) +
         w.working_bytes();
}

LayerSplit split_layers(const Workload& w, const std::vector<StageCapacity>& stages) {
  const int p = static_cast<int>(stages.size());
  LayerSplit split;
  split.layers.assign(p, 0);
  auto time_of = [&](int s, int layers) {
    const double flops =
        layers * w.forward_flops_per_layer() + (s == p - 1 ? w.forward_flops_head() : 0.0);
    return flops / stages[s].flops_per_s;
  };
  auto over = [&](int s, int layers) {
    return stage_memory_bytes(w, layers, s == 0, s == p - 1, stages[s].in_flight) -
           stages[s].memory_bytes;
  };
  int assigned = 0;
  for (int s = 0; s < p; ++s) {
    split.layers[s] = stages[s].min_layers;
    assigned += stages[s].min_layers;
    split.overflow_bytes = std::max(split.overflow_bytes, over(s, split.layers[s]));
  }
  if (assigned > w.layers || split.overflow_bytes > 0) {
    split.feasible = false;
    split.overflow_bytes = std::max(split.overflow_bytes, 1.0);
    return split;
  }
  for (; assigned < w.layers; ++assigned) {
    int best = -1;
    double best_time = std::numeric_limits<double>::infinity();
    for (int s = 0; s < p; ++s) {
      if (over(s, split.layers[s] + 1) > 0) continue;
      const double t = time_of(s, split.layers[s] + 1);
      if (t < best_time) best_time = t, best = s;
    }
    if (best < 0) {  // nobody has room: report how much the least-full stage would overflow
      split.feasible = false;
      double least = std::numeric_limits<double>::infinity();
      for (int s = 0; s < p; ++s) least = std::min(least, over(s, split.layers[s] + 1));
      split.overflow_bytes = least * (w.layers - assigned);
      return split;
    }
    ++split.layers[best];
  }
  return split;
}

std::vector<int> virtual_stage_split(const std::vector<int>& stage_layers, int chunks) {
  const int p = static_cast<int>(stage_layers.size());
  std::vector<int> split(static_cast<size_t>(p) * chunks);
  for (int s = 0; s < p; ++s) {
    for (int c = 0; c < chunks; ++c) {
      split[c * p + s] = stage_layers[s] / chunks + (c < stage_layers[s] % chunks ? 1 : 0);
    }
  }
  return split;
}

}  // namespace tessel::placement
