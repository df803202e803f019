// How fast a stage process computes on this machine, measured rather than assumed: the planner
// and the simulator need each device's FLOP/s, and a local job's devices are processes sharing
// this machine's cores.
#pragma once

#include "placement/workload.h"

namespace tessel::launcher {

struct ComputeSpeed {
  double flops_per_s = 0;  // one process with the machine to itself
  int cores = 1;           // CPUs this process may run on
  // Each process's share of the cores: min(1, cores / (processes x threads)) when all of them
  // compute at once; local_plan.h refines it for a placement.
  double share = 1;

  double effective_flops_per_s() const { return flops_per_s * share; }
};

// Times forward + backward of one micro-batch through min(2, layers) transformer blocks of the
// workload's model on `threads` kernel threads (the best of a few repetitions after a warm-up,
// at least min_seconds in all), counting the workload's FLOPs (forward_flops_per_layer, x3 with
// the backward). `processes` stage processes will share the machine.
ComputeSpeed measure_compute_speed(const placement::Workload& workload, int threads, int processes,
                                   double min_seconds = 0.2);

// CPUs this process may run on (its affinity mask), at least 1.
int available_cores();

}  // namespace tessel::launcher
