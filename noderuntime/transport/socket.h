// Thin POSIX socket helpers for the TCP transport: an owning file descriptor, a listening
// socket (port 0 = the kernel picks), connect with retries until a deadline, accept until a
// deadline, and whole-buffer reads and writes with a deadline. Every socket is non-blocking
// and close-on-exec; waiting is done with poll(). Errors are TransportErrors whose message
// names the address; callers prefix the peer they were talking to.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tessel::transport {

using SteadyTime = std::chrono::steady_clock::time_point;

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// A bound, listening TCP socket. Bind before the peers are told the address, so that port 0
// can be resolved to the real port and handed to them.
class TcpListener {
 public:
  // Throws TransportError naming host:port when it cannot resolve, bind or listen.
  static TcpListener bind(const std::string& host, uint16_t port);

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  int fd() const { return fd_.get(); }

 private:
  TcpListener(std::string host, uint16_t port, UniqueFd fd)
      : host_(std::move(host)), port_(port), fd_(std::move(fd)) {}

  std::string host_;
  uint16_t port_;
  UniqueFd fd_;
};

// Connects to host:port, retrying refused or unreachable attempts with a growing pause until
// `deadline`. Throws TransportError with the last error when the deadline passes.
UniqueFd connect_until(const std::string& host, uint16_t port, SteadyTime deadline);

// The next connection on `listener`, or an invalid fd when `deadline` passes first.
UniqueFd accept_until(const TcpListener& listener, SteadyTime deadline);

// Disables Nagle's algorithm: a header must not wait for the payload's ACK.
void set_tcp_nodelay(int fd);

// Sets SO_SNDBUF and SO_RCVBUF to `bytes` each (Linux grants twice the value, within
// net.core.wmem_max / rmem_max, and stops autotuning the socket) and clamps the window the socket
// advertises to `bytes` (TCP_WINDOW_CLAMP): without the clamp a request of v yields a window of
// 1-1.2 v depending on the kernel's overhead estimate, and the streams of one link together
// would keep more than their planned share of the bandwidth-delay product in flight, building a
// standing queue at the bottleneck (and overflowing a shallow one). Not every kernel keeps the
// clamp: 6.18 sets it anew from the receive buffer once data flows (a 5.24 MB window for 4 MiB,
// docs/benchmarks.md), so there the clamp only holds until then. Throws TransportError.
void set_socket_buffers(int fd, uint64_t bytes);

// The kernel's smoothed round-trip estimate of a connected TCP socket (TCP_INFO), in seconds;
// 0 when it has none. Right after connect it is the handshake's round trip.
double tcp_rtt_seconds(int fd);

// Write / read exactly `bytes` before `deadline` or throw TransportError: "connection closed",
// "timed out sending" / "timed out receiving", or the system error.
void send_all(int fd, std::span<const std::byte> bytes, SteadyTime deadline);
void recv_all(int fd, std::span<std::byte> bytes, SteadyTime deadline);

// Milliseconds left until `deadline` for poll(): 0 when passed, rounded up otherwise.
int poll_timeout_ms(SteadyTime deadline);

}  // namespace tessel::transport
