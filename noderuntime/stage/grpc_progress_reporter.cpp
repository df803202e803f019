#include "noderuntime/stage/grpc_progress_reporter.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <iostream>

#include "noderuntime/stage/stage_credentials.h"
#include "tessel/v1alpha1/progress.grpc.pb.h"

namespace tessel::stage {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kFirstBackoff{100};
constexpr milliseconds kLastBackoff{5000};
constexpr milliseconds kStopGrace{2000};

// A channel of its own: its subchannel (the TCP connection) is not shared with other channels
// to the same address, so that a channel made anew dials anew.
std::shared_ptr<grpc::Channel> progress_channel(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    milliseconds connect_timeout) {
  grpc::ChannelArguments args;
  // The launcher may start after its processes try to connect, and restart: reconnect fast
  // instead of gRPC's default of up to two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(kFirstBackoff.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(kLastBackoff.count()));
  // Despite its name, the least time a connection attempt (TCP, TLS, the server's HTTP/2
  // settings) is given. At 100 ms, a loaded operator, a Service whose forwarding lags or a
  // long link lost every handshake until the backoff had grown past it, and a stage could
  // report nothing for tens of seconds.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(connect_timeout.count()));
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(
      address, credentials ? credentials : grpc::InsecureChannelCredentials(), args);
}

std::string describe(const grpc::Status& status) {
  if (status.ok()) return "no error";
  return "status " + std::to_string(static_cast<int>(status.error_code())) + " (" +
         status.error_message() + ")";
}

}  // namespace

// The stream in flight, so that the destructor can cancel it.
struct GrpcProgressReporter::Stream {
  grpc::ClientContext context;
  bool reader_done = false;  // the server's side ended: the stream is over
};

GrpcProgressReporter::GrpcProgressReporter(pb::Tasklet tasklet, const std::string& address,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                                           std::string token, milliseconds ack_timeout)
    : ProgressReporter(std::move(tasklet)),
      address_(address),
      credentials_(std::move(credentials)),
      channel_(progress_channel(address_, credentials_, ack_timeout)),
      token_(std::move(token)),
      ack_timeout_(ack_timeout),
      sender_([this] { run(); }) {}

GrpcProgressReporter::~GrpcProgressReporter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  flush(kStopGrace);
  {
    std::lock_guard lock(mutex_);
    abandon_ = true;
    if (stream_) stream_->context.TryCancel();
  }
  changed_.notify_all();
  sender_.join();
}

void GrpcProgressReporter::send(pb::StageEvent event) {
  {
    std::lock_guard lock(mutex_);
    unacknowledged_.push_back(std::move(event));
  }
  changed_.notify_all();
}

bool GrpcProgressReporter::flush(milliseconds within) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, within, [this] { return unacknowledged_.empty(); });
}

void GrpcProgressReporter::acknowledged(uint64_t sequence) {
  {
    std::lock_guard lock(mutex_);
    ++acknowledgements_;
    while (!unacknowledged_.empty() && unacknowledged_.front().sequence() <= sequence) {
      pb::StageEvent& event = unacknowledged_.front();
      const int kind = event.event_case();
      if (kind == pb::StageEvent::kStarted || kind == pb::StageEvent::kStep ||
          kind == pb::StageEvent::kCheckpoint) {
        recap_[kind] = std::move(event);
      }
      unacknowledged_.pop_front();
    }
  }
  changed_.notify_all();
}

std::vector<pb::StageEvent> GrpcProgressReporter::recap_to_send() const {
  std::vector<pb::StageEvent> events;
  for (const auto& [kind, event] : recap_) {
    const bool superseded =
        std::any_of(unacknowledged_.begin(), unacknowledged_.end(),
                    [kind = kind](const pb::StageEvent& e) { return e.event_case() == kind; });
    if (!superseded) events.push_back(event);
  }
  std::sort(events.begin(), events.end(), [](const pb::StageEvent& a, const pb::StageEvent& b) {
    return a.sequence() < b.sequence();
  });
  return events;
}

void GrpcProgressReporter::run() {
  milliseconds backoff = kFirstBackoff;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return abandon_ || stopping_ || !unacknowledged_.empty(); });
      if (abandon_ || unacknowledged_.empty()) return;  // stopping with everything delivered
    }
    if (stream_once()) {
      backoff = kFirstBackoff;
      continue;
    }
    std::unique_lock lock(mutex_);
    if (changed_.wait_for(lock, backoff, [this] { return abandon_; })) return;
    backoff = std::min(backoff * 2, kLastBackoff);
  }
}

bool GrpcProgressReporter::stream_once() {
  auto stub = pb::StageProgress::NewStub(channel_);
  auto stream = std::make_shared<Stream>();
  {
    std::lock_guard lock(mutex_);
    if (abandon_) return false;
    stream_ = stream;
  }
  if (!token_.empty()) stream->context.AddMetadata("authorization", "Bearer " + token_);
  auto call = stub->Report(&stream->context);
  bool acknowledged_any = false;
  std::thread reader([&] {
    pb::ReportReply reply;
    while (call->Read(&reply)) {
      acknowledged_any = true;
      acknowledged(reply.received());
    }
    {
      std::lock_guard lock(mutex_);
      stream->reader_done = true;
    }
    changed_.notify_all();
  });

  uint64_t written = 0;  // the newest sequence written on this stream
  bool broken = false;
  bool cut_for_silence = false;
  std::unique_lock lock(mutex_);
  // Since when a written event has waited with no reply: from the write that started the wait,
  // reset by every reply.
  using Clock = std::chrono::steady_clock;
  Clock::time_point waiting_since = Clock::now();
  uint64_t replies_seen = acknowledgements_;
  bool was_awaiting = false;
  // Writes without holding the lock (report() must never wait for the network).
  const auto write = [&](const pb::StageEvent& event) {
    lock.unlock();
    const bool ok = call->Write(event);
    lock.lock();
    broken = !ok;
    return ok;
  };
  // Older than every unacknowledged event, so written first; `written` stays 0 for those.
  for (const pb::StageEvent& event : recap_to_send()) {
    if (!write(event)) break;
  }
  while (!broken) {
    const auto next = std::find_if(unacknowledged_.begin(), unacknowledged_.end(),
                                   [&](const pb::StageEvent& e) { return e.sequence() > written; });
    if (abandon_ || stream->reader_done) {
      broken = !(stopping_ && unacknowledged_.empty());
      break;
    }
    if (next != unacknowledged_.end()) {
      const pb::StageEvent event = *next;
      if (!write(event)) break;
      written = event.sequence();
      continue;
    }
    if (stopping_ && unacknowledged_.empty()) break;
    const bool awaiting_reply =
        !unacknowledged_.empty() && unacknowledged_.front().sequence() <= written;
    if (!awaiting_reply || !was_awaiting || acknowledgements_ != replies_seen) {
      replies_seen = acknowledgements_;
      waiting_since = Clock::now();
    }
    was_awaiting = awaiting_reply;
    if (!awaiting_reply) {
      changed_.wait(lock);
    } else if (changed_.wait_until(lock, waiting_since + ack_timeout_) == std::cv_status::timeout &&
               acknowledgements_ == replies_seen) {
      broken = true;  // the server holds the stream but answers nothing
      cut_for_silence = true;
      break;
    }
  }
  stream_.reset();
  const bool server_ended = stream->reader_done;
  lock.unlock();
  // A stream the server ended is finished, not cancelled: Finish() then gives the server's
  // status (e.g. a refusal) to log, not CANCELLED.
  if (broken && !server_ended) {
    stream->context.TryCancel();
  } else {
    call->WritesDone();
  }
  reader.join();
  const grpc::Status status = call->Finish();
  if (broken) {
    // One line per stream given up with events pending: with the backoff, at most one each 5 s
    // while the server stays away.
    std::lock_guard relock(mutex_);
    if (cut_for_silence || !unacknowledged_.empty()) {
      std::cerr << "tessel-stage rank " << tasklet().rank() << ": progress: the stream to "
                << address_ << " ended "
                << (cut_for_silence ? "unanswered for " + std::to_string(ack_timeout_.count()) +
                                          " ms (given up)"
                                    : "with " + describe(status))
                << "; " << unacknowledged_.size() << " event(s) not yet acknowledged\n";
    }
  }
  // The server holds the connection but answers nothing (frozen, or a half-open connection):
  // dial anew, which behind a Service may reach another endpoint, e.g. a new leader.
  if (cut_for_silence) channel_ = progress_channel(address_, credentials_, ack_timeout_);
  return (!broken && status.ok()) || acknowledged_any;
}

std::unique_ptr<ProgressReporter> progress_reporter_for(const JobSpec& job, pb::Tasklet tasklet,
                                                        std::ostream& out) {
  if (job.progress_address.empty()) {
    return std::make_unique<JsonLinesReporter>(std::move(tasklet), out);
  }
  std::string token;
  if (!job.progress_token_file.empty()) {
    token = read_token_file(job.progress_token_file, "progress.token_file");
  }
  return std::make_unique<GrpcProgressReporter>(
      std::move(tasklet), job.progress_address,
      channel_credentials(job.progress_ca_file, "progress.ca_file"), std::move(token));
}

}  // namespace tessel::stage
