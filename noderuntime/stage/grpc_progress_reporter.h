// Progress over gRPC (StageProgress.Report, proto/tessel/v1alpha1/progress.proto) to the
// launcher or the operator. report() only queues; a sender thread keeps one stream open,
// writes every event not yet acknowledged, and when the stream breaks (the server restarted,
// the network dropped) opens a new one after a backoff (0.1 s doubling to 5 s) and sends
// again from the first unacknowledged event. Training never waits for the server.
// A stream whose written events get no acknowledgement for the ack timeout (5 s) is given up
// and a new one opened on a new connection: a server that froze (a SIGSTOPped operator whose
// connection the kernel keeps open) would otherwise hold every event until it woke, while its
// successor behind the same Service waits. A connection attempt is given as long (TCP, TLS and
// the server's HTTP/2 settings together).
// A new stream first repeats the process's latest acknowledged Started, Step and
// CheckpointWritten events (each unless a newer one of its kind is still unacknowledged): the
// server at the other end may be a restarted operator that never saw what its predecessor
// acknowledged, and without them it would not know this rank's step, loss or checkpoint until
// the next of each. A server that saw them drops them (their sequences are not new).
// To the operator's stage service the channel is TLS and every stream carries the job's token
// as `authorization: Bearer <token>` metadata; to the launcher's loopback server, neither.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/stage/job_spec.h"
#include "noderuntime/stage/progress_reporter.h"

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace tessel::stage {

class GrpcProgressReporter : public ProgressReporter {
 public:
  // address: "host:port"; credentials: nullptr for an insecure channel; token: empty for none.
  GrpcProgressReporter(pb::Tasklet tasklet, const std::string& address,
                       std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
                       std::string token = "",
                       std::chrono::milliseconds ack_timeout = std::chrono::seconds(5));
  // Stops the sender after a last flush of at most the destructor's grace (2 s).
  ~GrpcProgressReporter() override;

  bool flush(std::chrono::milliseconds within) override;

 protected:
  void send(pb::StageEvent event) override;

 private:
  struct Stream;
  void run();
  // One stream's life, until everything is delivered after stopping, or it breaks. True when
  // it ended cleanly or the server acknowledged something (the backoff starts over).
  bool stream_once();
  void acknowledged(uint64_t sequence);
  // recap_'s events that a new stream repeats, in sequence order (under mutex_).
  std::vector<pb::StageEvent> recap_to_send() const;

  const std::string address_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::shared_ptr<grpc::Channel> channel_;  // the sender thread's alone
  const std::string token_;
  const std::chrono::milliseconds ack_timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<pb::StageEvent> unacknowledged_;  // in sequence order
  // The latest acknowledged event of each kind a new stream repeats, by event_case().
  std::map<int, pb::StageEvent> recap_;
  uint64_t last_sequence_ = 0;      // of the newest event queued
  uint64_t acknowledgements_ = 0;   // replies read, over every stream
  bool stopping_ = false;           // no more events will come: end once they are delivered
  bool abandon_ = false;            // end now, delivered or not
  std::shared_ptr<Stream> stream_;  // the stream in flight
  std::thread sender_;
};

// The reporter job.json asks for: over gRPC to progress.address (with its token_file and
// ca_file), or JSON lines on `out` without one. Throws ConfigError naming the field when a
// token or CA file cannot be used.
std::unique_ptr<ProgressReporter> progress_reporter_for(const JobSpec& job, pb::Tasklet tasklet,
                                                        std::ostream& out);

}  // namespace tessel::stage
