#include "noderuntime/launcher/stage_event.h"

namespace tessel::launcher {

TakenEvent take_stage_event(ProgressTracker& tracker, int ranks,
                            const v1alpha1::StageEvent& event) {
  TakenEvent taken;
  taken.rank = event.tasklet().rank();
  if (taken.rank < 0 || taken.rank >= ranks) {
    throw StageEventError("a process reported as rank " + std::to_string(taken.rank) +
                          ", the job has " + std::to_string(ranks) + " ranks");
  }
  if (event.has_step()) {
    taken.step_done = tracker.add_step(taken.rank, progress::step_metrics(event.step()));
  } else if (event.has_started()) {
    const v1alpha1::Started& started = event.started();
    tracker.add_start(taken.rank, started.has_resumed_from()
                                      ? std::optional<int64_t>(started.resumed_from())
                                      : std::nullopt);
    taken.started = true;
  } else if (event.has_error()) {
    taken.error = event.error().message();
  }
  return taken;
}

}  // namespace tessel::launcher
