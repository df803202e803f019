// Where a stage process's progress goes: the events of proto/tessel/v1alpha1/progress.proto,
// numbered in order. With a progress address in the job, over gRPC to whoever launched the
// process (grpc_progress_reporter.h); without one, as JSON lines on standard output.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "proto/progress/termination_message.h"
#include "tessel/v1alpha1/progress.pb.h"

namespace tessel::stage {

namespace pb = tessel::v1alpha1;

class ProgressReporter {
 public:
  explicit ProgressReporter(pb::Tasklet tasklet) : tasklet_(std::move(tasklet)) {}
  virtual ~ProgressReporter() = default;
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // Stamps the event with the tasklet and the next sequence number and sends it on. Never
  // blocks on the network.
  void report(pb::StageEvent event);
  // Waits until every event reported so far has been delivered, at most `within`; false when
  // some have not been.
  virtual bool flush(std::chrono::milliseconds within) = 0;

  const pb::Tasklet& tasklet() const { return tasklet_; }

  // What the pod's termination message says of this process (main.cpp writes it at exit): the
  // final figures (proto/progress/termination_message.h) once a done event was reported, the
  // message of an error event, else "" (stopped, or nothing reported).
  std::string termination_message() const;

 protected:
  virtual void send(pb::StageEvent event) = 0;

 private:
  // Notes what the event says for termination_message().
  void note_final(const pb::StageEvent& event);

  pb::Tasklet tasklet_;
  uint64_t sequence_ = 0;
  int64_t last_step_ = -1;  // of the newest step event
  double last_loss_ = 0;    // its loss
  int64_t checkpoint_step_ = -1;
  std::optional<progress::FinalFigures> done_;
  std::string failure_;
};

// One JSON object per line, flushed at once:
//   {"event":"step","rank":1,"stage":1,"replica":0,"step":3,"loss":5.12,...}
// "event" is start, step, checkpoint, stopped, done or error, then the tasklet (rank, stage,
// replica), then the event's fields; stage_process.h lists them.
class JsonLinesReporter : public ProgressReporter {
 public:
  JsonLinesReporter(pb::Tasklet tasklet, std::ostream& out)
      : ProgressReporter(std::move(tasklet)), out_(out) {}
  bool flush(std::chrono::milliseconds) override { return true; }

 protected:
  void send(pb::StageEvent event) override;

 private:
  std::ostream& out_;
};

// The JSON line of an event, as JsonLinesReporter writes it (without the newline).
std::string json_line(const pb::StageEvent& event);

}  // namespace tessel::stage
