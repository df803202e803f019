// The listening side of the probe protocol: answers the probes of authenticated peers (echoes
// pings, counts data and acknowledges it on a sync), one session at a time, so that two peers'
// measurements never share this node's link. One thread accepts, another serves: a connection
// that comes while a session is in progress is refused at once with kBusyRefusal (its client
// throws ProbeBusy and tries again later) rather than left waiting in the backlog until its
// I/O timeout. The one exception is a connection joining the session in progress (protocol
// version 2, its hello carrying the session's ticket): it is authenticated and served on a
// thread of its own, for the session's bulk phase over several TCP streams, until its bye or
// the session's end; at most max_joins at once. A session that fails (a stranger, a wrong
// secret, a hostile frame, a peer gone silent) ends that connection only (and a session's end
// ends its joined connections); its error is kept (the latest few) and passed to `on_error`. A
// busy refusal is no error of the server's: it is only counted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/prober/probe_handshake.h"
#include "noderuntime/transport/socket.h"
#include "placement/tcp_link_rate.h"

namespace tessel::prober {

struct ProbeServerOptions {
  std::string secret;
  // Each read or write; a peer silent longer loses its session.
  std::chrono::milliseconds io_timeout{5000};
  // A whole session, so that no peer holds the one slot for long.
  std::chrono::milliseconds max_session{120'000};
  // Connections that may join a session for its bulk phase, besides the session's own: the
  // most TCP streams the transport opens on one link (placement/tcp_link_rate.h). 0: none.
  int max_joins = placement::kMaxTcpStreamsPerLink;
};

// Throws ProbeError naming the field and the limit.
void check_probe_server_options(const ProbeServerOptions& options);

// Serves an authenticated connection's frames to its end (the client's bye), in protocol
// `version` (its sync-acks). Throws ProbeError naming `channel`'s peer on any failure, and when
// `deadline` passes (the session's limit, `max_session`). `stop` ends it between frames.
void serve_probe_frames(ProbeChannel& channel, uint32_t version,
                        std::chrono::steady_clock::time_point deadline,
                        std::chrono::milliseconds max_session, const std::atomic<bool>& stop);

class ProbeServer {
 public:
  using ErrorHandler = std::function<void(const std::string&)>;
  static constexpr size_t kKeptErrors = 16;
  // How long a refused client is given to read the refusal and close (well-behaved ones take a
  // round trip); the accepting thread waits that long at most (or io_timeout, if shorter).
  static constexpr std::chrono::milliseconds kBusyLingerLimit{1000};

  // Serves on `listener` until stop() or destruction.
  ProbeServer(transport::TcpListener listener, ProbeServerOptions options,
              ErrorHandler on_error = {});
  ~ProbeServer();
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;

  const std::string& host() const { return listener_.host(); }
  uint16_t port() const { return listener_.port(); }

  // Stops accepting and cuts the session in progress (its peer sees the connection close).
  void stop();

  // Sessions served to the client's bye, each counted once the server is free for the next
  // (before it closes the connection, which the client waits for after its bye).
  size_t sessions_completed() const { return completed_.load(); }
  // Connections refused because a session was in progress.
  size_t busy_refusals() const { return busy_refusals_.load(); }
  // Connections that joined a session and were served to their bye.
  size_t joins_completed() const { return joins_completed_.load(); }
  std::vector<std::string> recent_errors() const;

 private:
  void accept_loop();
  void session_loop();
  // One session to its end, then its joined connections'; frees the server for the next.
  void serve(transport::UniqueFd fd);
  // The session's opening: a new session (a join whose session has ended is refused); opens
  // the session to joins when the client speaks version 2. Returns the session's version.
  uint32_t open_session(ProbeChannel& channel, std::chrono::steady_clock::time_point deadline);
  // A connection that came during a session that takes joins: reads its hello (briefly); serves
  // it as a join when it carries the session's ticket, refuses it as busy otherwise.
  void triage(transport::UniqueFd fd);
  // A joined connection, on its own thread, to its bye or the session's end.
  void serve_join(ProbeChannel& channel, const ProbeHello& hello);
  // Closes the session to joins, cuts the joined connections still open and waits for them.
  void end_joins();
  // Sends the busy refusal, then reads (and drops) what the client sent until it closes, so
  // that closing never resets a connection whose client has not read the refusal yet.
  void refuse_busy(ProbeChannel channel);
  void record_error(const std::string& error);

  struct Join {
    std::thread thread;
    int fd = -1;  // -1 once its thread is about to close it
  };

  transport::TcpListener listener_;
  ProbeServerOptions options_;
  ErrorHandler on_error_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> completed_{0};
  std::atomic<size_t> busy_refusals_{0};
  std::atomic<size_t> joins_completed_{0};
  mutable std::mutex mu_;
  std::condition_variable session_cv_;  // a connection handed to the session thread, or stop
  transport::UniqueFd pending_;         // accepted, not yet taken by the session thread
  bool session_taken_ = false;          // pending_ holds a connection or a session is in progress
  int active_fd_ = -1;                  // the session in progress, shut down by stop()
  // The session in progress, while it takes joins (version 2), and when it must end.
  std::optional<SessionTicket> ticket_;
  std::chrono::steady_clock::time_point session_deadline_;
  std::vector<Join> joins_;  // of the session in progress
  std::deque<std::string> errors_;
  std::thread session_thread_;
  std::thread accept_thread_;
};

}  // namespace tessel::prober
