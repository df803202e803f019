// The low-communication mode's outer sync priced per step: the closed form (iteration_model.h)
// and the simulator (simulator.h) both compute one inner step (each stage's island all-reduce
// in StageTiming::allreduce_s) and add the outer sync with these, amortised over H steps.
#pragma once

#include "placement/pipeline_timing.h"

namespace tessel::placement {

// What one outer sync holds the job up, given one inner step of step_s: delayed, each stage's
// exchange (and the vote) runs during the next step and stalls it by what exceeds step_s; not
// delayed, it is waited whole. The slowest stage sets it (every rank waits for the pipeline),
// plus the outer step. 0 when timing.outer_sync.sync_every is 0 (synchronous).
double outer_sync_stall_s(const PipelineTiming& timing, double step_s);

// step_s + outer_sync_stall_s / H: the mean iteration over a cycle of H steps (step_s as is when
// synchronous, bit for bit).
double amortised_iteration_s(const PipelineTiming& timing, double step_s);

// The data-parallel communication of one step, amortised: per stage its all-reduces (gradients
// and the tied table) plus, in the low-communication mode, its delta exchange / H; the slowest
// stage's. Time on the links, overlapped with compute or not.
double data_parallel_comm_per_step_s(const PipelineTiming& timing);

}  // namespace tessel::placement
