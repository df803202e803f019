// The events `tessel local`'s stage processes stream to the launcher (progress.proto StageEvent,
// noderuntime/launcher/stage_event.h): the input is a stream of events, each a length-prefixed
// piece parsed as a StageEvent, taken as the supervisor takes them (take_stage_event into a
// ProgressTracker of a 4-rank, 50-step job) and every completed step's progress line printed as
// the supervisor prints it, with the tracker's ETA and iteration time. A message that does not
// parse ends the stream, as gRPC ends a call whose message it cannot parse; a StageEventError or
// the tracker's std::runtime_error is the refusal (the supervisor fails the run with it).
#include <google/protobuf/stubs/logging.h>

#include <stdexcept>

#include "noderuntime/launcher/progress_tracker.h"
#include "noderuntime/launcher/stage_event.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // libprotobuf logs every string field that is not UTF-8 (the parse then fails, as in gRPC).
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  constexpr int kRanks = 4;
  constexpr int kSteps = 50;
  tessel::launcher::ProgressTracker tracker(kRanks, kSteps);
  for (const std::string_view piece : tessel::fuzz::length_prefixed_pieces(data, size)) {
    tessel::v1alpha1::StageEvent event;
    if (!event.ParseFromArray(piece.data(), static_cast<int>(piece.size()))) return 0;
    try {
      const tessel::launcher::TakenEvent taken =
          tessel::launcher::take_stage_event(tracker, kRanks, event);
      if (taken.step_done) {
        tracker.progress_line(*taken.step_done);
        if (tracker.steps_run() > tracker.steps_to_run()) {
          tessel::fuzz::finding("more steps completed than the run had to do");
        }
      }
    } catch (const std::runtime_error&) {
      return 0;  // the supervisor fails the run: nothing after it is taken
    }
    tracker.eta_s();
    tracker.iteration_s();
  }
  return 0;
}
