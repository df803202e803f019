// How many transformer layers each pipeline stage gets: balance the slowest device of each
// stage group, subject to every stage fitting the memory of its smallest GPU.
#pragma once

#include <vector>

#include "placement/workload.h"

namespace tessel::placement {

struct StageCapacity {
  double flops_per_s = 0;   // the group's slowest device, effective (peak x utilisation)
  double memory_bytes = 0;  // the group's smallest device, usable bytes
  double in_flight = 1;     // micro-batches of activations the schedule keeps at this stage
  int min_layers = 1;       // at least one layer (interleaved: one per chunk)
};

struct LayerSplit {
  std::vector<int> layers;  // per stage, sums to the model's layers when feasible
  bool feasible = true;
  double overflow_bytes = 0;  // how far the tightest stage is over its memory when not
};

// Memory a stage needs: weights, gradients and optimizer state, the activations it keeps
// in flight, and the working set of one layer.
double stage_memory_bytes(const Workload& w, int layers, bool first, bool last, double in_flight);

// Greedy on increments (optimal for minimising the max of layers_j x cost_j): every stage
// starts at its minimum, then each further layer goes to the stage whose time would be the
// smallest after taking it, among those with room. Stage time also counts the head on the
// last stage. Infeasible when the minimum does not fit or layers run out of room.
LayerSplit split_layers(const Workload& w, const std::vector<StageCapacity>& stages);

// The stage runtime's split (one entry per virtual stage c x P + p, chunk c of stage p) of a
// per-stage split over `chunks` chunks per stage, the earlier chunks taking the remainder.
std::vector<int> virtual_stage_split(const std::vector<int>& stage_layers, int chunks);

}  // namespace tessel::placement
