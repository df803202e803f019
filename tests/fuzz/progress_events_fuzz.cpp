// The StageProgress events a stage pod streams to the operator (proto/tessel/v1alpha1/
// progress.proto, operator/server/stage_service.h): the input is a stream of events, each a
// length-prefixed piece parsed as a StageEvent. What the stage service does with an event the
// token let in, done here without the gRPC stream: the tasklet's rank is checked against the
// job's world size (StageService::admit), then the event is folded into the job's progress
// (StageService::deliver: JobProgressFold::add) and a step's metrics are read as the launcher
// reads them (progress::step_metrics). A message that does not parse ends the stream, as gRPC
// ends a call whose message it cannot parse.
#include <google/protobuf/stubs/logging.h>

#include "operator/server/job_progress.h"
#include "proto/progress/step_metrics.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // libprotobuf logs every string field that is not UTF-8 (the parse then fails, as in gRPC).
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  constexpr int kWorldSize = 4;
  tessel::server::JobProgressFold fold(kWorldSize);
  for (const std::string_view piece : tessel::fuzz::length_prefixed_pieces(data, size)) {
    tessel::v1alpha1::StageEvent event;
    if (!event.ParseFromArray(piece.data(), static_cast<int>(piece.size()))) return 0;
    const int rank = event.tasklet().rank();
    if (rank < 0 || rank >= kWorldSize) continue;  // admit: INVALID_ARGUMENT, the stream ends
    if (event.has_step()) tessel::progress::step_metrics(event.step());
    fold.add(event);
    fold.progress();
  }
  return 0;
}
