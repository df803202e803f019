// What the launcher takes from one event a stage process streams to it (progress.proto
// StageEvent, through the progress server): a step's metrics go to the progress tracker, a start
// says the checkpoint step the rank resumed from, an error says why the rank is failing. The
// supervisor acts on the result (prints the progress line, calls on_started, keeps the error).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "noderuntime/launcher/progress_tracker.h"
#include "tessel/v1alpha1/progress.pb.h"

namespace tessel::launcher {

struct TakenEvent {
  int rank = 0;
  std::optional<progress::StepMetrics> step_done;  // every rank has now reported this step
  bool started = false;
  std::optional<std::string> error;  // the rank's own error message
};

// An event from a rank the job does not have.
class StageEventError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws StageEventError when the event's rank is outside [0, ranks), and std::runtime_error
// naming the rank when the tracker refuses the event (a step out of range or reported twice, a
// start that differs from another rank's).
TakenEvent take_stage_event(ProgressTracker& tracker, int ranks, const v1alpha1::StageEvent& event);

}  // namespace tessel::launcher
