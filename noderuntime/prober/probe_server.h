// The listening side of the probe protocol: answers the probes of authenticated peers (echoes
// pings, counts data and acknowledges it on a sync), one session at a time, in a thread of its
// own. A session that fails (a stranger, a wrong secret, a hostile frame, a peer gone silent)
// ends that connection only; its error is kept (the latest few) and passed to `on_error`.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/transport/socket.h"

namespace tessel::prober {

struct ProbeServerOptions {
  std::string secret;
  // Each read or write; a peer silent longer loses its session.
  std::chrono::milliseconds io_timeout{5000};
  // A whole session, so that no peer holds the one slot for long.
  std::chrono::milliseconds max_session{120'000};
};

// Throws ProbeError naming the field and the limit.
void check_probe_server_options(const ProbeServerOptions& options);

// Serves one connection to its end (the client's bye). Throws ProbeError naming `channel`'s
// peer on any failure. `stop` ends it between frames.
void serve_probe_session(ProbeChannel& channel, const ProbeServerOptions& options,
                         const std::atomic<bool>& stop);

class ProbeServer {
 public:
  using ErrorHandler = std::function<void(const std::string&)>;
  static constexpr size_t kKeptErrors = 16;

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

  size_t sessions_completed() const { return completed_.load(); }
  std::vector<std::string> recent_errors() const;

 private:
  void run();
  void record_error(const std::string& error);

  transport::TcpListener listener_;
  ProbeServerOptions options_;
  ErrorHandler on_error_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> completed_{0};
  mutable std::mutex mu_;
  int active_fd_ = -1;  // the session in progress, shut down by stop()
  std::deque<std::string> errors_;
  std::thread thread_;
};

}  // namespace tessel::prober
