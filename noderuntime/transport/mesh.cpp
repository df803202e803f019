#include "noderuntime/transport/mesh.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/little_endian.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

constexpr uint32_t kHelloMagic = 0x484C5354u;   // "TSLH"
constexpr uint32_t kAnswerMagic = 0x414C5354u;  // "TSLA"
constexpr uint16_t kHelloVersion = 1;
constexpr size_t kHelloBytes = 32;
constexpr size_t kAnswerHeadBytes = 12;
constexpr size_t kMaxReasonBytes = 1024;
// How long an accepted connection may take to say hello before it is dropped, so that one
// stray client cannot hold up the mesh.
constexpr auto kHelloTimeout = std::chrono::seconds(5);

struct Hello {
  uint64_t job_id = 0;
  uint32_t from_rank = 0;
  uint32_t to_rank = 0;
  uint32_t world_size = 0;
};

std::array<std::byte, kHelloBytes> encode_hello(const Hello& hello) {
  std::array<std::byte, kHelloBytes> out{};
  LittleEndianWriter w(out);
  w.put(kHelloMagic, 4);
  w.put(kHelloVersion, 2);
  w.put(0, 2);
  w.put(hello.job_id, 8);
  w.put(hello.from_rank, 4);
  w.put(hello.to_rank, 4);
  w.put(hello.world_size, 4);
  w.put(crc32c(std::span(out).first(kHelloBytes - 4)), 4);
  return out;
}

Hello decode_hello(std::span<const std::byte, kHelloBytes> bytes) {
  LittleEndianReader r(bytes);
  if (r.get(4) != kHelloMagic) throw TransportError("not a tessel hello (bad magic)");
  const uint64_t version = r.get(2);
  if (version != kHelloVersion) {
    throw TransportError("hello version " + std::to_string(version) + ", expected " +
                         std::to_string(kHelloVersion));
  }
  r.get(2);
  Hello hello;
  hello.job_id = r.get(8);
  hello.from_rank = static_cast<uint32_t>(r.get(4));
  hello.to_rank = static_cast<uint32_t>(r.get(4));
  hello.world_size = static_cast<uint32_t>(r.get(4));
  if (r.get(4) != crc32c(bytes.first(kHelloBytes - 4))) {
    throw TransportError("hello checksum mismatch");
  }
  return hello;
}

// Why a hello does not belong on this listener, or nullopt when it does.
std::optional<std::string> hello_problem(const Hello& hello, const MeshOptions& options,
                                         const std::vector<UniqueFd>& fds) {
  const auto world = static_cast<uint32_t>(options.peers.size());
  if (hello.job_id != options.job_id) {
    return "job id " + std::to_string(hello.job_id) + " is not this job's " +
           std::to_string(options.job_id);
  }
  if (hello.world_size != world) {
    return "world size " + std::to_string(hello.world_size) + " is not this job's " +
           std::to_string(world);
  }
  if (hello.to_rank != static_cast<uint32_t>(options.rank)) {
    return "addressed to rank " + std::to_string(hello.to_rank) + ", this is rank " +
           std::to_string(options.rank);
  }
  if (hello.from_rank <= static_cast<uint32_t>(options.rank) || hello.from_rank >= world) {
    return "rank " + std::to_string(hello.from_rank) + " may not connect to rank " +
           std::to_string(options.rank) + " (the lower rank of a pair listens)";
  }
  if (fds[hello.from_rank].valid()) {
    return "rank " + std::to_string(hello.from_rank) + " is already connected";
  }
  return std::nullopt;
}

void send_answer(int fd, const std::optional<std::string>& rejection, SteadyTime deadline) {
  const std::string reason = rejection.value_or("").substr(0, kMaxReasonBytes);
  std::vector<std::byte> out(kAnswerHeadBytes + reason.size());
  LittleEndianWriter w(out);
  w.put(kAnswerMagic, 4);
  w.put(rejection ? 1 : 0, 4);
  w.put(reason.size(), 4);
  std::transform(reason.begin(), reason.end(), out.begin() + kAnswerHeadBytes,
                 [](char c) { return static_cast<std::byte>(c); });
  send_all(fd, out, deadline);
}

// Throws TransportError with the listener's reason when it rejected us.
void receive_answer(int fd, SteadyTime deadline) {
  std::array<std::byte, kAnswerHeadBytes> head{};
  recv_all(fd, head, deadline);
  LittleEndianReader r(head);
  if (r.get(4) != kAnswerMagic) throw TransportError("handshake answer has a bad magic");
  const uint64_t status = r.get(4);
  const uint64_t length = r.get(4);
  if (length > kMaxReasonBytes) {
    throw TransportError("handshake answer reason of " + std::to_string(length) + " bytes");
  }
  std::string reason(length, '\0');
  recv_all(fd, std::as_writable_bytes(std::span(reason)), deadline);
  if (status != 0) throw TransportError("handshake rejected: " + reason);
}

void validate(const MeshOptions& options, const TcpListener& listener) {
  const int world = static_cast<int>(options.peers.size());
  if (world < 1) throw TransportError("mesh: peers is empty");
  if (options.rank < 0 || options.rank >= world) {
    throw TransportError("mesh: rank " + std::to_string(options.rank) + " out of range [0, " +
                         std::to_string(world) + ")");
  }
  const PeerAddress& self = options.peers[options.rank];
  if (self.port != 0 && self.port != listener.port()) {
    throw TransportError("mesh: " + describe_peer(options.rank, self) +
                         " is this rank's address, but the listener is on port " +
                         std::to_string(listener.port()));
  }
}

}  // namespace

std::vector<UniqueFd> establish_mesh(const MeshOptions& options, const TcpListener& listener) {
  validate(options, listener);
  const int world = static_cast<int>(options.peers.size());
  const SteadyTime deadline = std::chrono::steady_clock::now() + options.connect_timeout;
  std::vector<UniqueFd> fds(world);

  for (int peer = 0; peer < options.rank; ++peer) {
    const PeerAddress& address = options.peers[peer];
    try {
      UniqueFd fd = connect_until(address.host, address.port, deadline);
      set_tcp_nodelay(fd.get());
      const Hello hello{options.job_id, static_cast<uint32_t>(options.rank),
                        static_cast<uint32_t>(peer), static_cast<uint32_t>(world)};
      send_all(fd.get(), encode_hello(hello), deadline);
      receive_answer(fd.get(), deadline);
      fds[peer] = std::move(fd);
    } catch (const TransportError& e) {
      throw TransportError(describe_peer(peer, address) + ": " + e.what());
    }
  }

  int missing = world - 1 - options.rank;
  std::string last_rejection;
  while (missing > 0) {
    UniqueFd fd = accept_until(listener, deadline);
    if (!fd.valid()) break;
    const SteadyTime hello_deadline =
        std::min(deadline, std::chrono::steady_clock::now() + kHelloTimeout);
    try {
      std::array<std::byte, kHelloBytes> bytes{};
      recv_all(fd.get(), bytes, hello_deadline);
      std::optional<std::string> problem;
      Hello hello;
      try {
        hello = decode_hello(bytes);
        problem = hello_problem(hello, options, fds);
      } catch (const TransportError& e) {
        problem = e.what();
      }
      send_answer(fd.get(), problem, hello_deadline);
      if (problem) {
        last_rejection = *problem;
        continue;
      }
      set_tcp_nodelay(fd.get());
      fds[hello.from_rank] = std::move(fd);
      --missing;
    } catch (const TransportError& e) {
      last_rejection = std::string("a connection failed its handshake: ") + e.what();
    }
  }
  if (missing > 0) {
    std::string names;
    for (int peer = options.rank + 1; peer < world; ++peer) {
      if (fds[peer].valid()) continue;
      names += (names.empty() ? "" : ", ") + describe_peer(peer, options.peers[peer]);
    }
    std::string message = describe_peer(options.rank, options.peers[options.rank]) +
                          ": timed out after " + std::to_string(options.connect_timeout.count()) +
                          " ms waiting for " + names + " to connect";
    if (!last_rejection.empty()) message += " (last rejected connection: " + last_rejection + ")";
    throw TransportError(message);
  }
  return fds;
}

}  // namespace tessel::transport
