#include "noderuntime/prober/probe_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <span>

#include "noderuntime/prober/probe_auth.h"
#include "noderuntime/prober/probe_error.h"
#include "noderuntime/prober/probe_handshake.h"

namespace tessel::prober {
namespace {

// "10.0.0.3:51234", for errors about a peer not yet authenticated.
std::string remote_address(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "unknown";
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace

void check_probe_server_options(const ProbeServerOptions& options) {
  check_probe_secret(options.secret, "prober server secret");
  if (options.io_timeout.count() <= 0 || options.max_session.count() <= 0) {
    throw ProbeError("prober server: io_timeout (" + std::to_string(options.io_timeout.count()) +
                     " ms) and max_session (" + std::to_string(options.max_session.count()) +
                     " ms) must be positive");
  }
}

void serve_probe_session(ProbeChannel& channel, const ProbeServerOptions& options,
                         const std::atomic<bool>& stop) {
  const auto deadline = std::chrono::steady_clock::now() + options.max_session;
  authenticate_client(channel, options.secret);
  std::vector<std::byte> payload;
  uint64_t data_bytes = 0;  // since the last sync
  while (!stop.load()) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw ProbeError(channel.peer() + ": the session ran past its limit of " +
                       std::to_string(options.max_session.count()) + " ms");
    }
    const FrameType type = channel.receive(payload);
    switch (type) {
      case FrameType::kPing:
        channel.send(FrameType::kPong, payload);
        break;
      case FrameType::kData:
        data_bytes += payload.size();
        break;
      case FrameType::kSync: {
        std::array<std::byte, 8> count;
        for (int i = 0; i < 8; ++i) count[i] = static_cast<std::byte>(data_bytes >> (8 * i));
        channel.send(FrameType::kSyncAck, count);
        data_bytes = 0;
        break;
      }
      case FrameType::kBye:
        return;
      default:
        throw ProbeError(channel.peer() + ": a " + frame_type_name(type) +
                         " frame is not a probe request");
    }
  }
}

ProbeServer::ProbeServer(transport::TcpListener listener, ProbeServerOptions options,
                         ErrorHandler on_error)
    : listener_(std::move(listener)), options_(std::move(options)), on_error_(std::move(on_error)) {
  check_probe_server_options(options_);
  session_thread_ = std::thread([this] { session_loop(); });
  try {
    accept_thread_ = std::thread([this] { accept_loop(); });
  } catch (...) {
    stop();
    throw;
  }
}

ProbeServer::~ProbeServer() { stop(); }

void ProbeServer::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    if (active_fd_ >= 0) ::shutdown(active_fd_, SHUT_RDWR);
  }
  session_cv_.notify_all();
  if (accept_thread_.joinable()) accept_thread_.join();
  if (session_thread_.joinable()) session_thread_.join();
}

std::vector<std::string> ProbeServer::recent_errors() const {
  std::lock_guard lock(mu_);
  return {errors_.begin(), errors_.end()};
}

void ProbeServer::record_error(const std::string& error) {
  {
    std::lock_guard lock(mu_);
    errors_.push_back(error);
    if (errors_.size() > kKeptErrors) errors_.pop_front();
  }
  if (on_error_) on_error_(error);
}

void ProbeServer::accept_loop() {
  while (!stop_.load()) {
    // A short accept wait, so that stop() is noticed promptly.
    transport::UniqueFd fd = transport::accept_until(
        listener_, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
    if (!fd.valid()) continue;
    {
      std::lock_guard lock(mu_);
      if (stop_.load()) return;
      if (!session_taken_) {
        session_taken_ = true;
        pending_ = std::move(fd);
        session_cv_.notify_one();
        continue;
      }
    }
    refuse_busy(std::move(fd));
  }
}

void ProbeServer::refuse_busy(transport::UniqueFd fd) {
  ++busy_refusals_;
  const auto deadline =
      std::chrono::steady_clock::now() + std::min(options_.io_timeout, kBusyLingerLimit);
  const std::string peer = "prober client " + remote_address(fd.get());
  try {
    transport::set_tcp_nodelay(fd.get());
    ProbeChannel channel(std::move(fd), peer, options_.io_timeout);
    channel.send(FrameType::kRefused,
                 std::as_bytes(std::span(kBusyRefusal.data(), kBusyRefusal.size())));
    ::shutdown(channel.fd(), SHUT_WR);
    // Closing with the client's hello unread would reset the connection, and a reset can
    // overtake the refusal: wait for the client to close (it does once it has read it).
    std::array<char, 4096> scratch;
    while (!stop_.load() && std::chrono::steady_clock::now() < deadline) {
      pollfd readable{channel.fd(), POLLIN, 0};
      const int ready = ::poll(&readable, 1, std::min(100, transport::poll_timeout_ms(deadline)));
      if (ready < 0 && errno != EINTR) return;
      if (ready <= 0) continue;
      const ssize_t got = ::recv(channel.fd(), scratch.data(), scratch.size(), 0);
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) return;
    }
  } catch (const std::exception&) {
    // The client left before the refusal reached it: nobody to tell, nothing of the server's.
  }
}

void ProbeServer::session_loop() {
  while (true) {
    transport::UniqueFd fd;
    {
      std::unique_lock lock(mu_);
      session_cv_.wait(lock, [this] { return stop_.load() || pending_.valid(); });
      if (stop_.load()) return;
      fd = std::move(pending_);
      active_fd_ = fd.get();
    }
    serve(std::move(fd));
  }
}

void ProbeServer::serve(transport::UniqueFd fd) {
  const std::string peer = "prober client " + remote_address(fd.get());
  ProbeChannel channel(std::move(fd), peer, options_.io_timeout);
  bool completed = false;
  try {
    transport::set_tcp_nodelay(channel.fd());
    serve_probe_session(channel, options_, stop_);
    completed = true;
  } catch (const ProbeError& e) {
    if (!stop_.load()) record_error(e.what());
  } catch (const std::exception& e) {
    if (!stop_.load()) record_error(peer + ": " + e.what());
  }
  // Free the server before the channel closes the connection: a client that saw it close (after
  // its bye) finds the server free for its next probe. And forget the descriptor before it is
  // closed, so stop() never shuts down a reused one.
  std::lock_guard lock(mu_);
  active_fd_ = -1;
  session_taken_ = false;
  if (completed) ++completed_;
}

}  // namespace tessel::prober
