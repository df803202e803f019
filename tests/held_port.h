// A loopback port held for a server that binds it later (in this process or a child), instead of
// a port picked, released and raced for by every process of a parallel ctest run.
//
// The port stays bound, not listening, with SO_REUSEADDR for as long as the HeldPort lives.
// Linux then lets a server that also sets SO_REUSEADDR (TcpListener, gRPC, asio) bind and listen
// on it, since no socket listens there yet, while bind(0) in any other process skips it: the
// kernel hands out no port that only address reuse would let two sockets share. Connections
// to the port are refused until the server listens.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tessel::testing {

class HeldPort {
 public:
  HeldPort() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) fail("socket");
    const int one = 1;
    if (::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) fail("SO_REUSEADDR");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) fail("bind");
    socklen_t length = sizeof address;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      fail("getsockname");
    }
    port_ = ntohs(address.sin_port);
  }
  ~HeldPort() { ::close(fd_); }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  [[noreturn]] void fail(const std::string& what) {
    const std::string reason = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error("HeldPort: " + what + " on 127.0.0.1: " + reason);
  }

  int fd_;
  uint16_t port_ = 0;
};

}  // namespace tessel::testing
