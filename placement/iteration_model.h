// Closed-form time of one training iteration of a pipeline replica: what the placement search
// evaluates thousands of times per second instead of running simulate_iteration(). No
// simulation and no per-micro-batch work: O(p) for GPipe; for 1F1B and interleaved a handful of
// loops over (virtual stage, turn stage, wrap count), O(p^3 v^2) at worst, about 2 us for 1F1B
// and 12 us for interleaved at p = 8, v = 4.
//
// GPipe is exact. 1F1B and interleaved take the longest of a few families of paths through the
// schedule's event graph (see iteration_model.cpp). Against the simulator, over the seeded
// random grid of tests/placement/simulator_test.cpp: 1F1B within 2%; interleaved within 7% in
// 95% of cases, worst seen 17%, for the default micro-batch group G = p (other G: 95% within
// 10%, worst seen 35%).
#pragma once

#include "placement/pipeline_timing.h"

namespace tessel::placement {

// In the low-communication mode (timing.outer_sync) the outer sync amortised over its H steps
// (outer_sync_cost.h). Throws std::invalid_argument for an invalid spec or a timing that does
// not fit it.
double predict_iteration_s(const ScheduleSpec& spec, const PipelineTiming& timing);

// One step without the outer sync: the iteration of synchronous data parallelism, the inner
// step of the low-communication mode (predict_iteration_s amortises the outer sync on top).
double predict_inner_step_s(const ScheduleSpec& spec, const PipelineTiming& timing);

}  // namespace tessel::placement
