// The step events of every rank (stage_process.h) gathered into one summary per step: a step
// is complete when every rank has reported it. The loss and batch are the same on every rank;
// the step time is the slowest rank's, bubble and network wait the mean over ranks.
// A resumed run starts after its checkpoint's step: every rank says so in its start event
// (the same step on every rank), and its steps run from that step + 1 to the job's last.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessel/v1alpha1/progress.pb.h"

namespace tessel::launcher {

struct RankStep {
  int64_t step = 0;
  double step_s = 0;
  double compute_s = 0;
  double network_wait_s = 0;
  double bubble_fraction = 0;
};

struct StepSummary {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
  int64_t tokens = 0;
  double step_s = 0;  // slowest rank
  double tokens_per_s = 0;
  double bubble_fraction = 0;  // mean over ranks
  double network_wait_s = 0;   // mean over ranks
  double compute_s = 0;        // slowest rank
};

class ProgressTracker {
 public:
  ProgressTracker(int ranks, int steps) : ranks_(ranks), steps_(steps), per_rank_(ranks) {}

  // Records one step event of `rank`; returns the step's summary when it was the last rank
  // to report it. Throws std::runtime_error naming the rank when the step is out of range (at
  // or before the step the run resumed from, or past the job's last) or reported twice.
  std::optional<StepSummary> add_step(int rank, const tessel::v1alpha1::Step& event);
  // Records one rank's start event: the checkpoint step it resumed from (nullopt: from the
  // beginning). Throws std::runtime_error naming both ranks when it differs from what an
  // earlier rank said, or when the step is outside [0, the job's steps].
  void add_start(int rank, std::optional<int64_t> resumed_from);

  const std::vector<StepSummary>& steps() const { return done_; }
  int total_steps() const { return steps_; }
  // The checkpoint step the run resumed from (nullopt: it started from the beginning).
  std::optional<int64_t> resumed_from() const { return resumed_from_; }
  // The steps this run had to do: the job's steps less the ones its checkpoint holds.
  int64_t steps_to_run() const { return steps_ - resumed_from_.value_or(0); }
  // The steps this run completed (every rank reported them).
  int64_t steps_run() const { return static_cast<int64_t>(done_.size()); }
  // Per rank, its step lines in order.
  const std::vector<std::vector<RankStep>>& per_rank() const { return per_rank_; }

  // Seconds left at the mean step time of the completed steps after the first (which also
  // connects and warms up); nullopt before there is one.
  std::optional<double> eta_s() const;
  // The representative iteration time: the median step time, the first step left out when
  // there are more.
  std::optional<double> iteration_s() const;
  // "step 12/300  loss 2.3456  18.2k tok/s  bubble 31%  net wait 0.12 s  ETA 0:53"
  std::string progress_line(const StepSummary& summary) const;

 private:
  struct Pending {
    int reported = 0;
    StepSummary summary;
  };

  int ranks_;
  int steps_;
  std::vector<std::vector<RankStep>> per_rank_;
  std::vector<Pending> pending_;  // index step - 1
  std::vector<StepSummary> done_;
  std::optional<int64_t> resumed_from_;
  int started_rank_ = -1;  // the first rank that reported its start
};

// "0:53", "1:02:03"
std::string format_duration(double seconds);

}  // namespace tessel::launcher
