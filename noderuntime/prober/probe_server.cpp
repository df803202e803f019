#include "noderuntime/prober/probe_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <span>
#include <system_error>

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
  if (options.max_joins < 0 || options.max_joins > placement::kMaxTcpStreamsPerLink) {
    throw ProbeError("prober server: max_joins = " + std::to_string(options.max_joins) +
                     ": must be 0 to " + std::to_string(placement::kMaxTcpStreamsPerLink));
  }
}

void serve_probe_frames(ProbeChannel& channel, uint32_t version,
                        std::chrono::steady_clock::time_point deadline,
                        std::chrono::milliseconds max_session, const std::atomic<bool>& stop) {
  std::vector<std::byte> payload;
  uint64_t data_bytes = 0;  // since the last sync
  while (!stop.load()) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw ProbeError(channel.peer() + ": the session ran past its limit of " +
                       std::to_string(max_session.count()) + " ms");
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
        // The count, and (version 2) when it was read: a client times the bulk data that came
        // between two syncs by this clock, free of its own send buffers.
        const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
        std::array<std::byte, sync_ack_bytes(kProtocolVersion)> ack{};
        for (int i = 0; i < 8; ++i) {
          ack[i] = static_cast<std::byte>(data_bytes >> (8 * i));
          ack[8 + i] = static_cast<std::byte>(static_cast<uint64_t>(now) >> (8 * i));
        }
        channel.send(FrameType::kSyncAck, std::span(ack).first(sync_ack_bytes(version)));
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
    for (const Join& join : joins_) {
      if (join.fd >= 0) ::shutdown(join.fd, SHUT_RDWR);
    }
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
    bool may_join = false;
    {
      std::lock_guard lock(mu_);
      if (stop_.load()) return;
      if (!session_taken_) {
        session_taken_ = true;
        pending_ = std::move(fd);
        session_cv_.notify_one();
        continue;
      }
      may_join = ticket_.has_value() && joins_.size() < static_cast<size_t>(options_.max_joins);
    }
    if (may_join) {
      triage(std::move(fd));
    } else {
      const std::string peer = "prober client " + remote_address(fd.get());
      transport::set_tcp_nodelay(fd.get());
      refuse_busy(ProbeChannel(std::move(fd), peer, options_.io_timeout));
    }
  }
}

void ProbeServer::triage(transport::UniqueFd fd) {
  const std::string peer = "prober client " + remote_address(fd.get());
  transport::set_tcp_nodelay(fd.get());
  // A client sends its hello at once: waiting for it briefly keeps the accepting thread (and
  // the clients behind this one) from waiting long on one that does not.
  ProbeChannel channel(std::move(fd), peer, std::min(options_.io_timeout, kBusyLingerLimit));
  ProbeHello hello;
  try {
    hello = read_hello(channel);
  } catch (const ProbeError&) {
    // No hello in time, or not one: not joining, and busy is all it needs to know.
    refuse_busy(std::move(channel));
    return;
  }
  std::string unserved;  // a joined connection no thread could be started for
  {
    std::lock_guard lock(mu_);
    if (!stop_.load() && hello.join && ticket_ && *hello.join == *ticket_ &&
        joins_.size() < static_cast<size_t>(options_.max_joins)) {
      Join& join = joins_.emplace_back();
      join.fd = channel.fd();
      try {
        join.thread = std::thread([this, hello, channel = std::move(channel)]() mutable {
          serve_join(channel, hello);
        });
        return;
      } catch (const std::system_error& e) {
        // The system's limit: the connection closes, unserved.
        joins_.pop_back();
        unserved = peer + ": cannot serve a joined connection: " + e.what();
      }
    }
  }
  if (!unserved.empty()) {
    record_error(unserved);
    return;
  }
  refuse_busy(std::move(channel));
}

void ProbeServer::serve_join(ProbeChannel& channel, const ProbeHello& hello) {
  bool completed = false;
  try {
    channel.set_io_timeout(options_.io_timeout);
    authenticate_client(channel, options_.secret, hello, SessionOffer{hello.version, *hello.join, 0});
    std::chrono::steady_clock::time_point deadline;
    {
      std::lock_guard lock(mu_);
      deadline = session_deadline_;
    }
    serve_probe_frames(channel, hello.version, deadline, options_.max_session, stop_);
    completed = true;
  } catch (const std::exception& e) {
    // Cut by the session's end or stop(): the session's own outcome says what happened.
    bool cut = stop_.load();
    {
      std::lock_guard lock(mu_);
      cut = cut || !ticket_ || *ticket_ != *hello.join;
    }
    if (!cut) record_error(e.what());
  }
  // Forget the descriptor before the channel closes it, so end_joins() and stop() never shut
  // down a reused one.
  std::lock_guard lock(mu_);
  for (Join& join : joins_) {
    if (join.fd == channel.fd()) join.fd = -1;
  }
  if (completed) ++joins_completed_;
}

void ProbeServer::end_joins() {
  std::vector<Join> joins;
  {
    std::lock_guard lock(mu_);
    ticket_.reset();
    for (Join& join : joins_) {
      if (join.fd >= 0) ::shutdown(join.fd, SHUT_RDWR);
    }
    joins = std::move(joins_);
    joins_.clear();
  }
  for (Join& join : joins) {
    if (join.thread.joinable()) join.thread.join();
  }
}

void ProbeServer::refuse_busy(ProbeChannel channel) {
  ++busy_refusals_;
  const auto deadline =
      std::chrono::steady_clock::now() + std::min(options_.io_timeout, kBusyLingerLimit);
  try {
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

uint32_t ProbeServer::open_session(ProbeChannel& channel,
                                   std::chrono::steady_clock::time_point deadline) {
  const ProbeHello hello = read_hello(channel);
  if (hello.join) {
    const std::string why = "no session to join: the session it joins has ended";
    channel.send(FrameType::kRefused, std::as_bytes(std::span(why.data(), why.size())));
    throw ProbeError(channel.peer() + " (says it is '" + hello.name + "'): " + why);
  }
  SessionOffer offer;
  offer.version = hello.version;
  if (hello.version >= 2 && options_.max_joins > 0) {
    offer.ticket = random_ticket();
    offer.joins = options_.max_joins;
    std::lock_guard lock(mu_);
    ticket_ = offer.ticket;
    session_deadline_ = deadline;
  }
  authenticate_client(channel, options_.secret, hello, offer);
  return hello.version;
}

void ProbeServer::serve(transport::UniqueFd fd) {
  const std::string peer = "prober client " + remote_address(fd.get());
  ProbeChannel channel(std::move(fd), peer, options_.io_timeout);
  bool completed = false;
  try {
    transport::set_tcp_nodelay(channel.fd());
    const auto deadline = std::chrono::steady_clock::now() + options_.max_session;
    const uint32_t version = open_session(channel, deadline);
    serve_probe_frames(channel, version, deadline, options_.max_session, stop_);
    completed = true;
  } catch (const ProbeError& e) {
    if (!stop_.load()) record_error(e.what());
  } catch (const std::exception& e) {
    if (!stop_.load()) record_error(peer + ": " + e.what());
  }
  end_joins();
  // Free the server before the channel closes the connection: a client that saw it close (after
  // its bye) finds the server free for its next probe. And forget the descriptor before it is
  // closed, so stop() never shuts down a reused one.
  std::lock_guard lock(mu_);
  active_fd_ = -1;
  session_taken_ = false;
  if (completed) ++completed_;
}

}  // namespace tessel::prober
