#include "noderuntime/transport/socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

std::string endpoint(const std::string& host, uint16_t port) {
  return host + ":" + std::to_string(port);
}

std::string errno_text(int err) { return std::strerror(err); }

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoList resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(),
                             &hints, &list);
  if (rc != 0) {
    throw TransportError(endpoint(host, port) + ": cannot resolve host: " + gai_strerror(rc));
  }
  return AddrInfoList(list);
}

UniqueFd open_socket(const addrinfo& ai) {
  return UniqueFd(
      socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
}

// Waits for `events` on fd until the deadline; false on timeout.
bool poll_until(int fd, short events, SteadyTime deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw TransportError("poll: " + errno_text(errno));
  }
}

// One non-blocking connect attempt; returns the connected fd or sets `error`.
UniqueFd try_connect(const addrinfo& ai, SteadyTime deadline, int& error) {
  UniqueFd fd = open_socket(ai);
  if (!fd.valid()) {
    error = errno;
    return {};
  }
  if (connect(fd.get(), ai.ai_addr, ai.ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) {
    error = errno;
    return {};
  }
  if (!poll_until(fd.get(), POLLOUT, deadline)) {
    error = ETIMEDOUT;
    return {};
  }
  int so_error = 0;
  socklen_t len = sizeof so_error;
  getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
  if (so_error != 0) {
    error = so_error;
    return {};
  }
  return fd;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

TcpListener TcpListener::bind(const std::string& host, uint16_t port) {
  const AddrInfoList list = resolve(host, port, true);
  std::string last_error = "no address";
  for (const addrinfo* ai = list.get(); ai; ai = ai->ai_next) {
    UniqueFd fd = open_socket(*ai);
    if (!fd.valid()) {
      last_error = "socket: " + errno_text(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = "bind: " + errno_text(errno);
      continue;
    }
    if (listen(fd.get(), SOMAXCONN) != 0) {
      last_error = "listen: " + errno_text(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    const uint16_t bound_port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    return TcpListener(host, bound_port, std::move(fd));
  }
  throw TransportError(endpoint(host, port) + ": cannot listen: " + last_error);
}

UniqueFd connect_until(const std::string& host, uint16_t port, SteadyTime deadline) {
  auto pause = std::chrono::milliseconds(5);
  int last_error = 0;
  while (true) {
    const AddrInfoList list = resolve(host, port, false);
    for (const addrinfo* ai = list.get(); ai; ai = ai->ai_next) {
      UniqueFd fd = try_connect(*ai, deadline, last_error);
      if (fd.valid()) return fd;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    // The peer may not be listening yet (it starts later): a network retry, not a condition
    // this process could wait on.
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  throw TransportError(endpoint(host, port) +
                       ": could not connect before the deadline: " + errno_text(last_error));
}

UniqueFd accept_until(const TcpListener& listener, SteadyTime deadline) {
  while (poll_until(listener.fd(), POLLIN, deadline)) {
    const int fd = accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return UniqueFd(fd);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      throw TransportError(endpoint(listener.host(), listener.port()) +
                           ": accept: " + errno_text(errno));
    }
  }
  return {};
}

void set_tcp_nodelay(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    throw TransportError("setsockopt TCP_NODELAY: " + errno_text(errno));
  }
}

void set_socket_buffers(int fd, uint64_t bytes) {
  const int value = static_cast<int>(std::min<uint64_t>(bytes, 1u << 30));
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, sizeof value) != 0) {
    throw TransportError("setsockopt SO_SNDBUF " + std::to_string(value) + ": " +
                         errno_text(errno));
  }
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof value) != 0) {
    throw TransportError("setsockopt SO_RCVBUF " + std::to_string(value) + ": " +
                         errno_text(errno));
  }
  if (setsockopt(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &value, sizeof value) != 0) {
    throw TransportError("setsockopt TCP_WINDOW_CLAMP " + std::to_string(value) + ": " +
                         errno_text(errno));
  }
}

double tcp_rtt_seconds(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  return info.tcpi_rtt / 1e6;
}

void send_all(int fd, std::span<const std::byte> bytes, SteadyTime deadline) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes = bytes.subspan(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!poll_until(fd, POLLOUT, deadline)) throw TransportError("timed out sending");
    } else if (errno == EPIPE || errno == ECONNRESET) {
      throw TransportError("connection closed");
    } else {
      throw TransportError("send: " + errno_text(errno));
    }
  }
}

void recv_all(int fd, std::span<std::byte> bytes, SteadyTime deadline) {
  while (!bytes.empty()) {
    const ssize_t n = ::recv(fd, bytes.data(), bytes.size(), 0);
    if (n > 0) {
      bytes = bytes.subspan(static_cast<size_t>(n));
    } else if (n == 0 || errno == ECONNRESET) {
      throw TransportError("connection closed");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!poll_until(fd, POLLIN, deadline)) throw TransportError("timed out receiving");
    } else {
      throw TransportError("recv: " + errno_text(errno));
    }
  }
}

int poll_timeout_ms(SteadyTime deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, 1 << 30));
}

}  // namespace tessel::transport
