// The step events of every rank (stage_process.h) gathered into one summary per step: a step
// is complete when every rank has reported it. A summary is a StepMetrics
// (proto/progress/step_metrics.h) of the whole job: the loss, gradient norm and batch are the
// same on every rank; the step and compute times are the slowest rank's, bubble and network wait
// the means over ranks, and tokens_per_s the batch over the slowest rank's step time.
// A resumed run starts after its checkpoint's step: every rank says so in its start event
// (the same step on every rank), and its steps run from that step + 1 to the job's last.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/progress/step_metrics.h"

namespace tessel::launcher {

class ProgressTracker {
 public:
  ProgressTracker(int ranks, int steps) : ranks_(ranks), steps_(steps), per_rank_(ranks) {}

  // Records one step event of `rank`; returns the step's summary when it was the last rank
  // to report it. Throws std::runtime_error naming the rank when the step is out of range (at
  // or before the step the run resumed from, or past the job's last) or reported twice.
  std::optional<progress::StepMetrics> add_step(int rank, const progress::StepMetrics& metrics);
  // Records one rank's start event: the checkpoint step it resumed from (nullopt: from the
  // beginning). Throws std::runtime_error naming both ranks when it differs from what an
  // earlier rank said, or when the step is outside [0, the job's steps].
  void add_start(int rank, std::optional<int64_t> resumed_from);

  const std::vector<progress::StepMetrics>& steps() const { return done_; }
  int total_steps() const { return steps_; }
  // The checkpoint step the run resumed from (nullopt: it started from the beginning).
  std::optional<int64_t> resumed_from() const { return resumed_from_; }
  // The steps this run had to do: the job's steps less the ones its checkpoint holds.
  int64_t steps_to_run() const { return steps_ - resumed_from_.value_or(0); }
  // The steps this run completed (every rank reported them).
  int64_t steps_run() const { return static_cast<int64_t>(done_.size()); }
  // Per rank, its steps' metrics in order.
  const std::vector<std::vector<progress::StepMetrics>>& per_rank() const { return per_rank_; }

  // Seconds left at the mean step time of the completed steps after the first (which also
  // connects and warms up); nullopt before there is one.
  std::optional<double> eta_s() const;
  // The representative iteration time: the median step time, the first step left out when
  // there are more.
  std::optional<double> iteration_s() const;
  // The mean step time, the first step left out when there are more: the iteration of a job
  // whose steps differ by design (the low-communication mode's sync steps).
  std::optional<double> mean_step_s() const;
  // "step 12/300  loss 2.3456  18.2k tok/s  bubble 31%  net wait 0.12 s  ETA 0:53"
  std::string progress_line(const progress::StepMetrics& summary) const;

 private:
  struct Pending {
    int reported = 0;
    progress::StepMetrics summary;
  };

  int ranks_;
  int steps_;
  std::vector<std::vector<progress::StepMetrics>> per_rank_;
  std::vector<Pending> pending_;  // index step - 1
  std::vector<progress::StepMetrics> done_;
  std::optional<int64_t> resumed_from_;
  int started_rank_ = -1;  // the first rank that reported its start
};

// "0:53", "1:02:03"; "-" for NaN, ">99999:59:59" from kMaxPrintedDuration seconds on.
inline constexpr double kMaxPrintedDuration = 99999.0 * 3600 + 59 * 60 + 59.5;
std::string format_duration(double seconds);

}  // namespace tessel::launcher
