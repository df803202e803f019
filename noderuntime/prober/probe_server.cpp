#include "noderuntime/prober/probe_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

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
  thread_ = std::thread([this] { run(); });
}

ProbeServer::~ProbeServer() { stop(); }

void ProbeServer::stop() {
  stop_ = true;
  {
    std::lock_guard lock(mu_);
    if (active_fd_ >= 0) ::shutdown(active_fd_, SHUT_RDWR);
  }
  if (thread_.joinable()) thread_.join();
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

void ProbeServer::run() {
  while (!stop_.load()) {
    // A short accept wait, so that stop() is noticed promptly.
    transport::UniqueFd fd = transport::accept_until(
        listener_, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
    if (!fd.valid()) continue;
    const std::string peer = "prober client " + remote_address(fd.get());
    try {
      transport::set_tcp_nodelay(fd.get());
    } catch (const std::exception& e) {
      record_error(peer + ": " + e.what());
      continue;
    }
    {
      std::lock_guard lock(mu_);
      if (stop_.load()) return;
      active_fd_ = fd.get();
    }
    ProbeChannel channel(std::move(fd), peer, options_.io_timeout);
    try {
      serve_probe_session(channel, options_, stop_);
      ++completed_;
    } catch (const std::exception& e) {
      if (!stop_.load()) record_error(e.what());
    }
    // Forget the descriptor before the channel closes it, so stop() never shuts down a reused one.
    std::lock_guard lock(mu_);
    active_fd_ = -1;
  }
}

}  // namespace tessel::prober
