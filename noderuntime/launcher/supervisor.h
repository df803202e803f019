// Watches the stage processes of a running job until every one has ended: feeds their step
// events (from the progress server) to the progress tracker and prints the progress line, stops
// them all when the user asks (SIGINT/SIGTERM) or when one of them fails, and says which one was at
// fault.
//
// The process at fault: among those that ended badly other than by the launcher's own
// signals, one killed by a signal first, then one that exited without an error line, then one
// whose error does not name another rank's tasklet (the others fail because it is gone), then
// the first seen. (An error event is how a process says what went wrong.)
#pragma once

#include <cstdio>
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
