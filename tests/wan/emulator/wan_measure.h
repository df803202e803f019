// What the WAN emulator's own tests measure across it, with plain sockets made inside its
// namespaces: ICMP echo round trips (the kernel of the far namespace answers), one TCP stream's
// throughput and the windows the kernel granted it, and how many datagrams of a UDP burst
// arrive.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/wan/wan_emulator.h"

// The emulator for `config`, or a skip naming what this machine lacks.
#define START_OR_SKIP(wan, config)                            \
  std::unique_ptr<WanEmulator> wan;                           \
  try {                                                       \
    wan = WanEmulator::start(config);                         \
  } catch (const WanUnavailable& e) {                         \
    GTEST_SKIP() << "WAN emulator unavailable: " << e.what(); \
  }

namespace tessel::wan {

using Seconds = std::chrono::duration<double>;

inline sockaddr_in socket_address(const std::string& ip, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
  return address;
}

inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what + ": " + std::strerror(errno));
}

// Waits up to `timeout` for `fd` to be readable.
inline bool readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

inline std::uint16_t internet_checksum(const std::uint8_t* data, std::size_t size) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i + 1 < size; i += 2) sum += std::uint32_t{data[i]} << 8 | data[i + 1];
  if (size % 2) sum += std::uint32_t{data[size - 1]} << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

// `count` ICMP echo round trips from namespace `from` to namespace `to`, one after another
// (milliseconds each); a lost reply (none within 2 s) throws.
inline std::vector<double> ping_ms(const WanEmulator& wan, std::size_t from, std::size_t to,
                                   int count) {
  std::vector<double> rtts;
  wan.call_in(from, [&] {
    const int fd = ::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
    check(fd >= 0, "raw ICMP socket");
    const sockaddr_in target = socket_address(wan.address(to), 0);
    const std::uint16_t id = static_cast<std::uint16_t>(::getpid());
    for (int seq = 0; seq < count; ++seq) {
      std::uint8_t request[64] = {8,
                                  0,
                                  0,
                                  0,
                                  static_cast<std::uint8_t>(id >> 8),
                                  static_cast<std::uint8_t>(id),
                                  static_cast<std::uint8_t>(seq >> 8),
                                  static_cast<std::uint8_t>(seq)};
      const std::uint16_t sum = internet_checksum(request, sizeof request);
      request[2] = static_cast<std::uint8_t>(sum >> 8);
      request[3] = static_cast<std::uint8_t>(sum);
      const auto sent = std::chrono::steady_clock::now();
      check(::sendto(fd, request, sizeof request, 0, reinterpret_cast<const sockaddr*>(&target),
                     sizeof target) == sizeof request,
            "ICMP echo to " + wan.address(to));
      for (;;) {  // the raw socket sees every ICMP message: wait for this echo's reply
        const auto waited = std::chrono::steady_clock::now() - sent;
        if (waited > std::chrono::seconds(2) ||
            !readable(fd, std::chrono::milliseconds(2000) -
                              std::chrono::duration_cast<std::chrono::milliseconds>(waited))) {
          ::close(fd);
          throw std::runtime_error("no ICMP echo reply from " + wan.address(to) + " in 2 s");
        }
        std::uint8_t reply[1500];
        const ssize_t got = ::recv(fd, reply, sizeof reply, 0);
        if (got < 28) continue;
        const std::size_t header = (reply[0] & 15) * 4u;
        const std::uint8_t* icmp = reply + header;
        if (icmp[0] == 0 && (icmp[4] << 8 | icmp[5]) == id && (icmp[6] << 8 | icmp[7]) == seq) {
          rtts.push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent)
                  .count());
          break;
        }
      }
    }
    ::close(fd);
  });
  return rtts;
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

struct StreamResult {
  int sndbuf_granted = 0;         // SO_SNDBUF as the kernel reports it after the request
  int rcvbuf_granted = 0;         // SO_RCVBUF likewise
  std::uint32_t peer_window = 0;  // the largest window the receiver advertised to the sender
  double mbit_per_s = 0;          // payload throughput after the warm-up
  std::uint64_t bytes = 0;        // payload the receiver got in all
  std::uint64_t bytes_sent = 0;
};

// One TCP stream from namespace `from` to namespace `to` for `warmup` + `measure`, both ends'
// SO_SNDBUF and SO_RCVBUF set to `buffer_bytes` (0: the kernel's autotuning) before they connect.
// The rate counts the payload the receiver read after the warm-up.
inline StreamResult tcp_stream(const WanEmulator& wan, std::size_t from, std::size_t to,
                               int buffer_bytes, Seconds warmup, Seconds measure) {
  StreamResult result;
  auto size_buffers = [&](int fd) {
    if (buffer_bytes <= 0) return;
    check(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes) == 0,
          "SO_SNDBUF");
    check(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes) == 0,
          "SO_RCVBUF");
  };
  int listener = -1, sender = -1;
  std::uint16_t port = 0;
  wan.call_in(to, [&] {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    check(listener >= 0, "socket");
    size_buffers(listener);  // an accepted socket inherits them, and the window scale with them
    sockaddr_in address = socket_address(wan.address(to), 0);
    check(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0, "bind");
    check(::listen(listener, 1) == 0, "listen");
    socklen_t length = sizeof address;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
  });
  wan.call_in(from, [&] {
    sender = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    check(sender >= 0, "socket");
    size_buffers(sender);
  });
  std::atomic<std::uint64_t> received{0};
  std::uint64_t at_warmup = 0;
  std::chrono::steady_clock::time_point warm_time, end_time;
  std::thread receiver([&] {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    socklen_t length = sizeof result.rcvbuf_granted;
    ::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &result.rcvbuf_granted, &length);
    std::vector<char> buffer(1 << 20);
    for (;;) {
      const ssize_t got = ::read(fd, buffer.data(), buffer.size());
      if (got <= 0) break;
      received += static_cast<std::uint64_t>(got);
    }
    end_time = std::chrono::steady_clock::now();
    ::close(fd);
  });
  const sockaddr_in target = socket_address(wan.address(to), port);
  if (::connect(sender, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0) {
    const std::string error = std::strerror(errno);
    ::shutdown(listener, SHUT_RDWR);  // the receiver's accept returns
    receiver.join();
    ::close(sender);
    ::close(listener);
    throw std::runtime_error("connect to " + wan.address(to) + ": " + error);
  }
  socklen_t length = sizeof result.sndbuf_granted;
  ::getsockopt(sender, SOL_SOCKET, SO_SNDBUF, &result.sndbuf_granted, &length);
  std::vector<char> chunk(256 * 1024, 'w');
  const auto start = std::chrono::steady_clock::now();
  bool warm = false;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (!warm && now - start >= warmup) {
      warm = true;
      at_warmup = received;
      warm_time = now;
    }
    tcp_info info{};
    socklen_t info_length = sizeof info;
    ::getsockopt(sender, IPPROTO_TCP, TCP_INFO, &info, &info_length);
    result.peer_window = std::max(result.peer_window, info.tcpi_snd_wnd);
    if (now - start >= warmup + measure) break;
    const ssize_t put = ::send(sender, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (put <= 0) break;
    result.bytes_sent += static_cast<std::uint64_t>(put);
  }
  // What was still in flight at the end counts: the receiver reads it all before the end time.
  ::shutdown(sender, SHUT_WR);
  receiver.join();
  ::close(sender);
  ::close(listener);
  result.bytes = received;
  result.mbit_per_s =
      static_cast<double>(received - at_warmup) * 8 / 1e6 / Seconds(end_time - warm_time).count();
  return result;
}

// Sends `count` UDP datagrams of `payload` bytes from namespace `from` to namespace `to`, in
// groups of `group` with a millisecond between groups (so that neither the sender's device
// queue nor the receiving socket overflows); how many arrived.
inline int udp_burst(const WanEmulator& wan, std::size_t from, std::size_t to, int count,
                     int payload = 200, int group = 20) {
  int receiver = -1, sender = -1;
  std::uint16_t port = 0;
  wan.call_in(to, [&] {
    receiver = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    check(receiver >= 0, "socket");
    const int big = 8 << 20;
    ::setsockopt(receiver, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    sockaddr_in address = socket_address(wan.address(to), 0);
    check(::bind(receiver, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0, "bind");
    socklen_t length = sizeof address;
    ::getsockname(receiver, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
  });
  wan.call_in(from, [&] {
    sender = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    check(sender >= 0, "socket");
  });
  std::atomic<int> arrived{0};
  std::atomic<bool> done{false};
  std::thread counter([&] {
    char buffer[2048];
    while (!done || readable(receiver, std::chrono::milliseconds(0))) {
      if (!readable(receiver, std::chrono::milliseconds(100))) continue;
      if (::recv(receiver, buffer, sizeof buffer, 0) > 0) ++arrived;
    }
  });
  const sockaddr_in target = socket_address(wan.address(to), port);
  std::vector<char> datagram(static_cast<std::size_t>(payload), 'u');
  for (int i = 0; i < count; ++i) {
    ::sendto(sender, datagram.data(), datagram.size(), 0,
             reinterpret_cast<const sockaddr*>(&target), sizeof target);
    if ((i + 1) % group == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Whatever is still held by the link's delay arrives within it (plus a margin).
  std::this_thread::sleep_for(
      std::chrono::milliseconds(200 + static_cast<int>(wan.link(from, to).delay_ms)));
  done = true;
  counter.join();
  ::close(sender);
  ::close(receiver);
  return arrived;
}

}  // namespace tessel::wan
