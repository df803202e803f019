// One TrainingJob's progress as its stage processes report it (proto/tessel/v1alpha1/
// progress.proto), folded into what the job's status shows.
//
// Semantics, per rank (the rank's current process; a process of a new incarnation replaces the
// rank's earlier one, whose later events are ignored):
// - step: the highest step EVERY rank of the job has completed (the least of the ranks' newest
//   steps; -1 until every rank has reported one). A step is done only when all ranks are past
//   it, and a restarted run that resumed from a checkpoint counts from there again.
// - loss: that step's loss (the mean over the global batch, the same on every rank).
// - tokens_per_s: the least among the ranks' newest reports (the slowest rank sets the pace).
// - last_checkpoint_step: the highest step every rank holds a checkpoint of (a rank's checkpoint
//   or the step it resumed from; -1 until every rank has one): what a restart resumes from.
// - started, done, stopped: how many ranks' current processes said so.
// - failures: one line per rank whose current process failed, in rank order.
// - stages: per pipeline stage, the figures (step time, bubble fraction, network wait) of the
//   latest step of the stage's SLOWEST replica: the one whose latest step took longest. Not the
//   median: the replicas of a stage all-reduce their gradients every step, so the stage moves at
//   its slowest replica's pace, and that replica (a straggling GPU, a slow link) is what a person
//   looking at the figures has to find; a median over two or three replicas would hide it. The
//   three figures are that one replica's, so they explain each other (its wait is part of its
//   step time).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "operator/controller/job_progress.h"
#include "proto/progress/step_metrics.h"
#include "tessel/v1alpha1/progress.pb.h"

namespace tessel::server {

// A failure message is cut to this many bytes: it lands in the TrainingJob's status.
inline constexpr size_t kMaxFailureMessageBytes = 1024;
// Processes of one rank remembered as replaced (their late events ignored).
inline constexpr size_t kMaxRetiredIncarnations = 8;

// The type the reconciler reads (operator/controller/job_progress.h), defined there once.
using controller::JobProgress;

class JobProgressFold {
 public:
  explicit JobProgressFold(int world_size);

  // Folds one event of rank event.tasklet().rank(), which the caller has checked is in
  // [0, world_size). Returns whether the progress changed.
  bool add(const tessel::v1alpha1::StageEvent& event);
  const JobProgress& progress() const { return progress_; }

 private:
  struct Rank {
    uint64_t incarnation = 0;
    bool known = false;  // some process of this rank has reported
    std::vector<uint64_t> retired;
    bool started = false, done = false, stopped = false;
    int64_t step = -1;
    double loss = std::numeric_limits<double>::quiet_NaN();  // of `step`; NaN: not reported
    int64_t checkpoint_step = -1;
    // The latest step this process reported: its rate and timing (nullopt: none yet).
    std::optional<progress::StepMetrics> latest;
    std::string failure;  // empty: none
    int stage = -1, replica = -1;
  };

  // The rank's state for this event's process; nullptr when the process was replaced.
  Rank* current(const tessel::v1alpha1::Tasklet& tasklet);
  // The rank is past `step` without a loss reported for it (resumed, or stopped).
  static void passed(Rank& rank, int64_t step);
  // Recomputes the job's figures from the ranks' (the ranks are few, events per step per rank).
  JobProgress summary() const;
  // Per stage, the figures of its slowest replica's latest step.
  std::vector<controller::StageFigures> stage_figures() const;

  std::vector<Rank> ranks_;
  int64_t total_steps_ = 0;
  JobProgress progress_;
};

}  // namespace tessel::server
