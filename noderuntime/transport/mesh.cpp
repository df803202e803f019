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
constexpr uint16_t kHelloVersion = 2;           // 2 added stream, streams and buffer bytes
constexpr size_t kHelloBytes = 40;
constexpr uint64_t kMaxBufferBytes = 1u << 30;
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
  uint16_t stream = 0;
  uint16_t streams = 1;
  uint32_t buffer_bytes = 0;
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
  w.put(hello.stream, 2);
  w.put(hello.streams, 2);
  w.put(hello.buffer_bytes, 4);
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
  hello.stream = static_cast<uint16_t>(r.get(2));
  hello.streams = static_cast<uint16_t>(r.get(2));
  hello.buffer_bytes = static_cast<uint32_t>(r.get(4));
  if (r.get(4) != crc32c(bytes.first(kHelloBytes - 4))) {
    throw TransportError("hello checksum mismatch");
  }
  return hello;
}

// Why a hello does not belong on this listener, or nullopt when it does.
std::optional<std::string> hello_problem(const Hello& hello, const MeshOptions& options,
                                         const std::vector<MeshLink>& links) {
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
  const std::string from = "rank " + std::to_string(hello.from_rank);
  if (hello.streams < 1 || hello.streams > kMaxStreamsPerLink) {
    return from + " announced " + std::to_string(hello.streams) + " streams, outside [1, " +
           std::to_string(kMaxStreamsPerLink) + "]";
  }
  if (hello.stream >= hello.streams) {
    return from + " sent stream " + std::to_string(hello.stream) + " of a " +
           std::to_string(hello.streams) + "-stream link";
  }
  if (hello.buffer_bytes > kMaxBufferBytes) {
    return from + " asked for socket buffers of " + std::to_string(hello.buffer_bytes) +
           " bytes, at most " + std::to_string(kMaxBufferBytes);
  }
  const std::vector<UniqueFd>& streams = links[hello.from_rank].streams;
  if (!streams.empty() && streams.size() != hello.streams) {
    return from + " announced " + std::to_string(hello.streams) + " streams, earlier " +
           std::to_string(streams.size());
  }
  if (!streams.empty() && streams[hello.stream].valid()) {
    return from + " stream " + std::to_string(hello.stream) + " is already connected";
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

bool link_complete(const MeshLink& link) {
  return !link.streams.empty() && std::all_of(link.streams.begin(), link.streams.end(),
                                              [](const UniqueFd& fd) { return fd.valid(); });
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

std::vector<MeshLink> establish_mesh(const MeshOptions& options, const TcpListener& listener) {
  validate(options, listener);
  const int world = static_cast<int>(options.peers.size());
  const SteadyTime deadline = std::chrono::steady_clock::now() + options.connect_timeout;
  std::vector<MeshLink> links(world);

  for (int peer = 0; peer < options.rank; ++peer) {
    const PeerAddress& address = options.peers[peer];
    MeshLink& link = links[peer];
    std::string where = describe_peer(peer, address);
    try {
      // Stream 0 is connected first: its handshake measures the round trip the plan needs.
      UniqueFd first = connect_until(address.host, address.port, deadline);
      link.rtt_s = tcp_rtt_seconds(first.get());
      const double capacity = static_cast<size_t>(peer) < options.link_capacity.size()
                                  ? options.link_capacity[peer]
                                  : 0.0;
      link.plan =
          plan_link_streams(capacity, link.rtt_s, options.streams_per_link, options.buffer_limits);
      Hello hello{options.job_id,
                  static_cast<uint32_t>(options.rank),
                  static_cast<uint32_t>(peer),
                  static_cast<uint32_t>(world),
                  0,
                  static_cast<uint16_t>(link.plan.streams),
                  static_cast<uint32_t>(link.plan.buffer_bytes)};
      for (int stream = 0; stream < link.plan.streams; ++stream) {
        if (link.plan.streams > 1) {
          where = describe_peer(peer, address) + " stream " + std::to_string(stream) + " of " +
                  std::to_string(link.plan.streams);
        }
        UniqueFd fd =
            stream == 0 ? std::move(first) : connect_until(address.host, address.port, deadline);
        if (link.plan.buffer_bytes) set_socket_buffers(fd.get(), link.plan.buffer_bytes);
        set_tcp_nodelay(fd.get());
        hello.stream = static_cast<uint16_t>(stream);
        send_all(fd.get(), encode_hello(hello), deadline);
        receive_answer(fd.get(), deadline);
        link.streams.push_back(std::move(fd));
      }
    } catch (const TransportError& e) {
      throw TransportError(where + ": " + e.what());
    }
  }

  const auto missing = [&] {
    int count = 0;
    for (int peer = options.rank + 1; peer < world; ++peer) count += !link_complete(links[peer]);
    return count;
  };
  std::string last_rejection;
  while (missing() > 0) {
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
        problem = hello_problem(hello, options, links);
      } catch (const TransportError& e) {
        problem = e.what();
      }
      if (!problem && hello.buffer_bytes) set_socket_buffers(fd.get(), hello.buffer_bytes);
      send_answer(fd.get(), problem, hello_deadline);
      if (problem) {
        last_rejection = *problem;
        continue;
      }
      set_tcp_nodelay(fd.get());
      MeshLink& link = links[hello.from_rank];
      if (link.streams.empty()) {
        link.streams.resize(hello.streams);
        link.plan.streams = hello.streams;
        link.plan.buffer_bytes = hello.buffer_bytes;
      }
      link.streams[hello.stream] = std::move(fd);
    } catch (const TransportError& e) {
      last_rejection = std::string("a connection failed its handshake: ") + e.what();
    }
  }
  if (missing() > 0) {
    std::string names;
    for (int peer = options.rank + 1; peer < world; ++peer) {
      const MeshLink& link = links[peer];
      if (link_complete(link)) continue;
      names += (names.empty() ? "" : ", ") + describe_peer(peer, options.peers[peer]);
      if (!link.streams.empty()) {
        const auto connected = std::count_if(link.streams.begin(), link.streams.end(),
                                             [](const UniqueFd& fd) { return fd.valid(); });
        names += " (" + std::to_string(connected) + " of its " +
                 std::to_string(link.streams.size()) + " streams connected)";
      }
    }
    std::string message = describe_peer(options.rank, options.peers[options.rank]) +
                          ": timed out after " + std::to_string(options.connect_timeout.count()) +
                          " ms waiting for " + names + " to connect";
    if (!last_rejection.empty()) message += " (last rejected connection: " + last_rejection + ")";
    throw TransportError(message);
  }
  return links;
}

}  // namespace tessel::transport
