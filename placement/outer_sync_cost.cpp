#include "placement/outer_sync_cost.h"

#include <algorithm>

namespace tessel::placement {

double outer_sync_stall_s(const PipelineTiming& timing, double step_s) {
  const OuterSyncTiming& o = timing.outer_sync;
  if (o.sync_every <= 0) return 0;
  double exchange = o.vote_s;
  for (const StageTiming& stage : timing.stages)
    exchange = std::max(exchange, stage.delta_exchange_s);
  const double waited = o.delayed ? std::max(0.0, exchange - step_s) : exchange;
  return waited + o.outer_step_s;
}

double amortised_iteration_s(const PipelineTiming& timing, double step_s) {
  if (timing.outer_sync.sync_every <= 0) return step_s;
  return step_s + outer_sync_stall_s(timing, step_s) / timing.outer_sync.sync_every;
}

double data_parallel_comm_per_step_s(const PipelineTiming& timing) {
  const int h = timing.outer_sync.sync_every;
  double slowest = 0;
  for (const StageTiming& stage : timing.stages) {
    double s = stage.allreduce_s + stage.table_allreduce_s;
    if (h > 0) s += stage.delta_exchange_s / h;
    slowest = std::max(slowest, s);
  }
  return slowest;
}

}  // namespace tessel::placement
