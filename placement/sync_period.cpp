#include "placement/sync_period.h"

#include <cstdio>
#include <stdexcept>

#include "placement/iteration_model.h"
#include "placement/outer_sync_cost.h"

namespace tessel::placement {
namespace {

// The convergence study's worst final loss above fp32 deltas', per precision, fewest bits first
// (docs/low-communication.md, Convergence: fables and synthetic jobs, H in {10, 50, 100}).
struct MeasuredLossCost {
  int bits;
  double loss_cost;
};
constexpr MeasuredLossCost kMeasuredLossCost[] = {{4, 0.0497}, {8, 0.0047}, {32, 0.0}};

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g%%", 100 * fraction);
  return text;
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g s", s);
  return text;
}

}  // namespace

DataParallelMode low_communication_chosen() {
  DataParallelMode mode;
  mode.kind = DataParallelKind::LowCommunication;
  mode.choose_sync_every = true;
  mode.choose_delta_bits = true;
  mode.delta_bits = choose_delta_bits().bits;
  return mode;
}

SyncPeriodChoice choose_sync_every(double step_s, double stall_s, double overhead) {
  if (!(step_s >= 0) || !(stall_s >= 0) || !(overhead > 0))
    throw std::invalid_argument(
        "choose_sync_every: the inner step and the stall must be >= 0 and the overhead > 0, got " +
        seconds(step_s) + ", " + seconds(stall_s) + ", " + percent(overhead));
  SyncPeriodChoice c{.sync_every = 0,
                     .step_s = step_s,
                     .stall_s = stall_s,
                     .overhead = overhead,
                     .within = true,
                     .smaller = 0};
  for (const int h : kSyncEveryLadder) {
    c.sync_every = h;
    if (stall_s / h <= overhead * step_s) return c;
    c.smaller = h;  // over the tolerance
  }
  // Even the largest H is over: it is chosen for want of a better.
  c.within = false;
  c.smaller = 0;
  return c;
}

SyncPeriodChoice choose_sync_every(const ScheduleSpec& spec, const PipelineTiming& timing,
                                   double overhead) {
  if (timing.outer_sync.sync_every <= 0)
    throw std::invalid_argument("choose_sync_every: a synchronous timing has no sync period");
  const double step = predict_inner_step_s(spec, timing);
  return choose_sync_every(step, outer_sync_stall_s(timing, step), overhead);
}

std::string sync_every_reason(const SyncPeriodChoice& c) {
  const double per_step = c.stall_s / c.sync_every;
  const double share = c.step_s > 0 ? per_step / c.step_s : 0;
  std::string text = "H=" + std::to_string(c.sync_every) + ": ";
  text += c.within ? "the smallest H whose outer sync adds at most " + percent(c.overhead) +
                         " to the inner step"
                   : "the largest H considered; even it adds more than " + percent(c.overhead) +
                         " to the inner step";
  text += " (stall " + seconds(c.stall_s) + " per sync / " + std::to_string(c.sync_every) + " = " +
          seconds(per_step) + " a step, " + percent(share) + " of the " + seconds(c.step_s) +
          " inner step";
  if (c.smaller > 0) {
    const double smaller_per_step = c.stall_s / c.smaller;
    text += "; H=" + std::to_string(c.smaller) + ": " + seconds(smaller_per_step) + ", " +
            percent(c.step_s > 0 ? smaller_per_step / c.step_s : 0);
  }
  return text + ")";
}

DeltaBitsChoice choose_delta_bits() {
  for (const MeasuredLossCost& m : kMeasuredLossCost)
    if (m.loss_cost <= kDeltaBitsLossTolerance) return {m.bits, m.loss_cost};
  return {32, 0.0};
}

std::string delta_bits_reason(const DeltaBitsChoice& c) {
  std::string text = std::to_string(c.bits) +
                     "-bit deltas: the fewest bits whose measured loss cost is within " +
                     percent(kDeltaBitsLossTolerance) + " of fp32 deltas' (";
  for (size_t i = 0; i + 1 < std::size(kMeasuredLossCost); ++i)
    text += (i ? ", " : "") + std::to_string(kMeasuredLossCost[i].bits) + "-bit: +" +
            percent(kMeasuredLossCost[i].loss_cost) + " at worst";
  return text + "; the convergence study, docs/low-communication.md)";
}

}  // namespace tessel::placement
