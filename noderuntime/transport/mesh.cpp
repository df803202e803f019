#include "noderuntime/transport/mesh.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "noderuntime/transport/mesh_hello.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

// How long an accepted connection may take to say hello before it is dropped, so that one
// stray client cannot hold up the mesh.
constexpr auto kHelloTimeout = std::chrono::seconds(5);

void send_answer(int fd, const std::optional<std::string>& rejection, SteadyTime deadline) {
  send_all(fd, encode_answer(rejection), deadline);
}

// Throws TransportError with the listener's reason when it rejected us.
void receive_answer(int fd, SteadyTime deadline) {
  std::array<std::byte, kAnswerHeadBytes> head{};
  recv_all(fd, head, deadline);
  const AnswerHead answer = decode_answer_head(head);
  std::string reason(answer.reason_bytes, '\0');
  recv_all(fd, std::as_writable_bytes(std::span(reason)), deadline);
  if (answer.rejected) throw TransportError("handshake rejected: " + reason);
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
