// Watches the stage processes of a running job until every one has ended: feeds their step
// events (from the progress server) to the progress tracker and prints the progress line, stops
// them all when the user asks (SIGINT/SIGTERM) or when one of them fails, and says which one was at
// fault.
//
// The process at fault is chosen by assign_blame (blame.h): one killed by a signal the
// launcher did not send, one that failed without saying why, one whose error is its own, then
// the one its peers timed out on (it stopped answering). A process that has no error event is
// judged by the error line of its log. A process stopped by a signal (SIGSTOP) when the job is
// being stopped is killed at once: it cannot act on SIGTERM.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "noderuntime/launcher/progress_server.h"
#include "noderuntime/launcher/progress_tracker.h"
#include "noderuntime/launcher/run_result.h"
#include "noderuntime/launcher/stage_processes.h"
#include "noderuntime/launcher/stop_signals.h"

namespace tessel::launcher {

struct SupervisorOptions {
  double grace_s = 30;
  std::FILE* out = nullptr;
  bool tty = false;
  // Called with a rank when its started event arrives (it has written its device line to its
  // log by then); it may write to `out` (the progress line is ended first).
  std::function<void(int rank)> on_started;
};

struct SupervisedRun {
  RunStatus status = RunStatus::kDone;
  int exit_code = 0;
  std::string message;
  double wall_s = 0;
};

SupervisedRun supervise(StageProcesses& processes, ProgressServer& progress, StopSignals& signals,
                        ProgressTracker& tracker, const SupervisorOptions& options);

}  // namespace tessel::launcher
