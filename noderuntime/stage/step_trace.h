// The measured timeline of one rank, for a Chrome-trace JSON (chrome://tracing, Perfetto) in
// the simulator's layout (placement/chrome_trace.h): one process per rank, named after its
// tasklet, one thread per DT-FM stream ("2. forward-compute", "7. optimizer-comm", ...), one
// complete event per Forward, Backward, send, receive, all-reduce bucket and optimizer step.
// Times are CLOCK_MONOTONIC microseconds, shared by every process on one machine, so the
// files of several ranks merge into one timeline.
//
// A communication event spans from posting the operation to the first moment the rank saw it
// complete (it polls its in-flight requests between instructions).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "placement/simulator.h"

namespace tessel::stage {

struct TraceEvent {
  placement::Stream stream = placement::Stream::ForwardCompute;
  std::string name;  // "F mb3 c1", "recv B mb0 c0", "send F mb2 c0", "all-reduce c0 h.3", ...
  double start_s = 0;
  double end_s = -1;  // -1 while open
};

class StepTrace {
 public:
  StepTrace(int rank, std::string label) : rank_(rank), label_(std::move(label)) {}

  static double now_s();  // steady clock, seconds

  // Opens an event starting now; close() ends it now. Returns its id.
  size_t open(placement::Stream stream, std::string name);
  void close(size_t id);
  void add(placement::Stream stream, std::string name, double start_s, double end_s);

  int rank() const { return rank_; }
  const std::string& label() const { return label_; }
  const std::vector<TraceEvent>& events() const { return events_; }

  // {"traceEvents": [...], "displayTimeUnit": "ms"} for one or several ranks.
  static nlohmann::json chrome_json(const std::vector<const StepTrace*>& ranks);
  // Throws std::runtime_error naming the path when it cannot be written.
  static void write(const std::vector<const StepTrace*>& ranks, const std::string& path);

 private:
  int rank_;
  std::string label_;
  std::vector<TraceEvent> events_;
};

}  // namespace tessel::stage
