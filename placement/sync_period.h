// The low-communication mode's settings the planner chooses (issue 15): the sync period H and
// the precision of the exchanged delta.
//
// H: the cost model alone would always take the largest H (the outer sync's stall is paid once
// per H steps), but a larger H costs loss per token (docs/low-communication.md, Convergence), so
// the planner takes the SMALLEST H of kSyncEveryLadder at which the amortised sync adds at most
// sync_overhead (5% by default) of the inner step, the iteration with no cross-site exchange at
// all (H -> infinity). That H keeps the training closest to synchronous training, and any larger
// H buys less than the tolerance in speed. The cost model chooses it for each layout it prices
// (full_cost.h): the stall per sync and the inner step are closed-form per layout, so the search
// compares layouts each at its own H.
//
// Bits: the fewest bits whose measured loss cost against fp32 deltas is within
// kDeltaBitsLossTolerance. Measured, not modelled: the convergence study's worst excess loss.
#pragma once

#include <string>

#include "placement/data_parallel_mode.h"
#include "placement/pipeline_timing.h"

namespace tessel::placement {

// The low-communication mode with H and the bits left to the planner (auto): what the mode
// means to `tessel plan` and `tessel simulate` when they are not given.
DataParallelMode low_communication_chosen();

struct SyncPeriodChoice {
  int sync_every = 0;   // H chosen
  double step_s = 0;    // the inner step (closed form)
  double stall_s = 0;   // what one outer sync adds (outer_sync_stall_s)
  double overhead = 0;  // the tolerance: stall_s / H <= overhead x step_s
  // false when even the ladder's largest H leaves more than the tolerance (it is chosen then)
  bool within = true;
  int smaller = 0;  // the ladder's value below sync_every, which is over the tolerance (0: none)
};

// The smallest H of kSyncEveryLadder with stall_s / H <= overhead x step_s, else the largest.
SyncPeriodChoice choose_sync_every(double step_s, double stall_s, double overhead);

// The same for a timing (its outer_sync.sync_every > 0: the mode's; the H it holds does not
// matter): the inner step from the closed form (predict_inner_step_s), the stall from
// outer_sync_stall_s.
SyncPeriodChoice choose_sync_every(const ScheduleSpec& spec, const PipelineTiming& timing,
                                   double overhead);

// "H=50: the smallest H whose outer sync adds at most 5% to the inner step (stall 22.1 s per
// sync / 50 = 0.442 s a step, 2.4% of the 18.2 s inner step; H=20: 1.10 s, 6.1%)"
std::string sync_every_reason(const SyncPeriodChoice& choice);

// The precision chosen: the fewest bits whose measured loss cost is within this of fp32's.
inline constexpr double kDeltaBitsLossTolerance = 0.02;

struct DeltaBitsChoice {
  int bits = 32;
  double loss_cost = 0;  // measured: the worst final loss above fp32 deltas', as a fraction
};

// The convergence study's measurement (docs/low-communication.md, 27 Nov): 8-bit deltas ended at
// most 0.47% above fp32's final loss (synthetic, H = 10; within 1.2% either way), 4-bit at most
// 4.97% above (fables, H = 10). So the choice is 8 bits: it does not depend on the topology or the
// layout.
DeltaBitsChoice choose_delta_bits();

// "8-bit deltas: the fewest bits whose measured loss cost is within 2% of fp32 deltas' (4-bit:
// +4.97% at worst, 8-bit: +0.47% at worst; the convergence study, docs/low-communication.md)"
std::string delta_bits_reason(const DeltaBitsChoice& choice);

}  // namespace tessel::placement
