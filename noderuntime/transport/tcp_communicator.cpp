#include "noderuntime/transport/tcp_communicator.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "noderuntime/transport/direct_all_reduce.h"
#include "noderuntime/transport/link_warmup.h"
#include "noderuntime/transport/mesh.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

void validate(const TcpOptions& options) {
  const int world = static_cast<int>(options.peers.size());
  if (world < 1) throw TransportError("tcp communicator: peers is empty");
  if (options.rank < 0 || options.rank >= world) {
    throw TransportError("tcp communicator: rank " + std::to_string(options.rank) +
                         " out of range [0, " + std::to_string(world) + ")");
  }
  if (options.io_timeout <= std::chrono::milliseconds::zero()) {
    throw TransportError("tcp communicator: io_timeout must be positive");
  }
  try {
    check_ring_options(options.ring);
  } catch (const TransportError& e) {
    throw TransportError(std::string("tcp communicator: ") + e.what());
  }
  if (options.streams_per_link < 0 || options.streams_per_link > kMaxStreamsPerLink) {
    throw TransportError("tcp communicator: streams_per_link " +
                         std::to_string(options.streams_per_link) + " outside [0, " +
                         std::to_string(kMaxStreamsPerLink) + "] (0 chooses per link)");
  }
  if (!options.link_capacity.empty() &&
      options.link_capacity.size() != static_cast<size_t>(world)) {
    throw TransportError("tcp communicator: link_capacity has " +
                         std::to_string(options.link_capacity.size()) + " entries, peers has " +
                         std::to_string(world));
  }
  for (size_t p = 0; p < options.link_capacity.size(); ++p) {
    const double capacity = options.link_capacity[p];
    if (!std::isfinite(capacity) || capacity < 0) {
      throw TransportError("tcp communicator: link_capacity[" + std::to_string(p) + "] " +
                           std::to_string(capacity) + " must be finite and >= 0");
    }
  }
  if (options.max_message_bytes == 0) {
    throw TransportError("tcp communicator: max_message_bytes must be positive");
  }
  if (options.all_reduces_in_flight < 1 || options.all_reduces_in_flight > kMaxAllReducesInFlight) {
    throw TransportError("tcp communicator: all_reduces_in_flight " +
                         std::to_string(options.all_reduces_in_flight) + " outside [1, " +
                         std::to_string(kMaxAllReducesInFlight) + "]");
  }
  if (options.min_piece_bytes == 0) {
    throw TransportError("tcp communicator: min_piece_bytes must be positive");
  }
  if (options.links && options.links->ranks() != world) {
    throw TransportError("tcp communicator: links has " + std::to_string(options.links->ranks()) +
                         " ranks, peers has " + std::to_string(world));
  }
}

// One line on the link's streams, when there is something to say.
std::optional<std::string> plan_line(int rank, const std::string& peer, const MeshLink& link,
                                     bool connected_here, bool slow_start_after_idle) {
  // Buffers sized from the BDP: a window beyond the kernel's autotuning, which slow start after
  // idle throws away (read_slow_start_after_idle).
  const bool restarts_slowly = slow_start_after_idle && link.plan.buffer_bytes > 0;
  if (link.plan.streams == 1 && link.plan.capped_by.empty() && !restarts_slowly) {
    return std::nullopt;
  }
  std::string line = "tessel transport: rank " + std::to_string(rank) + ": link to " + peer + ": " +
                     describe(link.plan);
  if (connected_here) {
    char rtt[48];
    std::snprintf(rtt, sizeof rtt, ", measured RTT %.1f ms", link.rtt_s * 1e3);
    line += rtt;
    if (!link.plan.capped_by.empty() && link.plan.window_bound_bytes_per_s > 0) {
      char bound[96];
      std::snprintf(bound, sizeof bound, "; the streams carry at most %.0f Mbit/s",
                    link.plan.window_bound_bytes_per_s * 8 / 1e6);
      line += bound;
    }
  } else {
    line += " (chosen by the peer)";
  }
  if (restarts_slowly) {
    line +=
        "; net.ipv4.tcp_slow_start_after_idle is 1: after an idle spell longer than about one "
        "RTT every stream restarts from 10 segments (set it to 0 in this network namespace)";
  }
  return line;
}

}  // namespace

TcpCommunicator::TcpCommunicator(TcpOptions options, const TcpListener& listener)
    : options_(std::move(options)) {
  validate(options_);
  const MeshOptions mesh{options_.job_id,
                         options_.rank,
                         options_.peers,
                         options_.connect_timeout,
                         options_.streams_per_link,
                         options_.link_capacity,
                         options_.buffer_limits.value_or(read_socket_buffer_limits())};
  std::vector<MeshLink> links = establish_mesh(mesh, listener);
  std::vector<std::string> names(options_.peers.size());
  for (int p = 0; p < size(); ++p) names[p] = describe_peer(p, options_.peers[p]);
  warm_up_links(links, options_.warm_up_peers, names,
                std::chrono::steady_clock::now() + options_.connect_timeout);
  const bool slow_start_after_idle =
      options_.slow_start_after_idle.value_or(read_slow_start_after_idle());
  peers_.resize(options_.peers.size());
  for (int p = 0; p < size(); ++p) {
    if (p == rank()) continue;
    const std::string name = describe_peer(p, options_.peers[p]);
    if (auto line = plan_line(rank(), name, links[p], p < rank(), slow_start_after_idle)) {
      if (options_.log) {
        options_.log(*line);
      } else {
        std::fprintf(stderr, "%s\n", line->c_str());
      }
    }
    TcpPeerOptions peer_options{options_.job_id,
                                name,
                                options_.links ? options_.links->shape(rank(), p) : LinkShape{},
                                options_.burst_bytes,
                                options_.io_timeout,
                                options_.min_piece_bytes,
                                options_.max_message_bytes};
    peers_[p] = std::make_unique<TcpPeer>(std::move(links[p].streams), std::move(peer_options));
  }
}

int TcpCommunicator::streams_to(int peer) const {
  if (peer < 0 || peer >= size() || !peers_[peer]) return 0;
  return peers_[peer]->streams();
}

TcpCommunicator::~TcpCommunicator() { close(); }

TcpPeer& TcpCommunicator::peer(int rank, const char* operation) {
  if (rank < 0 || rank >= size()) {
    throw TransportError(std::string(operation) + ": peer " + std::to_string(rank) +
                         " out of range [0, " + std::to_string(size()) + ")");
  }
  if (rank == this->rank()) {
    throw TransportError(std::string(operation) + ": peer " + std::to_string(rank) +
                         " is this rank");
  }
  return *peers_[rank];
}

Request TcpCommunicator::isend(int to, const TensorInfo& info, std::span<const std::byte> payload) {
  TcpPeer& target = peer(to, "isend");
  const std::string where = "isend to " + describe_peer(to, options_.peers[to]) + ": ";
  uint64_t bytes = 0;
  try {
    bytes = payload_bytes_of(info);
  } catch (const TransportError& e) {
    throw TransportError(where + e.what());
  }
  if (payload.size() != bytes) {
    throw TransportError(where + "payload is " + std::to_string(payload.size()) + " bytes, " +
                         to_string(info.dtype) + " " + shape_to_string(info.shape) + " is " +
                         std::to_string(bytes));
  }
  return target.send(info, payload);
}

Request TcpCommunicator::irecv(int from, const TensorInfo& expected, std::span<std::byte> buffer) {
  TcpPeer& source = peer(from, "irecv");
  const std::string where = "irecv from " + describe_peer(from, options_.peers[from]) + ": ";
  uint64_t bytes = 0;
  try {
    bytes = payload_bytes_of(expected);
  } catch (const TransportError& e) {
    throw TransportError(where + e.what());
  }
  if (buffer.size() != bytes) {
    throw TransportError(where + "buffer is " + std::to_string(buffer.size()) + " bytes, " +
                         to_string(expected.dtype) + " " + shape_to_string(expected.shape) +
                         " is " + std::to_string(bytes));
  }
  return source.recv(expected, buffer);
}

Request TcpCommunicator::iall_reduce(void* data, size_t count, DType dtype,
                                     const std::vector<int>& group, ReduceOp op) {
  if (dtype != DType::kF32) {
    throw TransportError(std::string("all-reduce: dtype ") + to_string(dtype) +
                         " is not supported by the TCP ring (f32 only)");
  }
  if (op != ReduceOp::kSum) throw TransportError("all-reduce: only sum is supported");
  check_group(*this, group);
  auto completion = std::make_shared<Completion>();
  if (group.size() == 1) {
    completion->complete();
    return Request(completion);
  }
  const std::span<float> buffer(static_cast<float*>(data), count);
  Lane* lane = nullptr;
  {
    std::lock_guard lock(mu_);
    if (closing_) {
      completion->fail("rank " + std::to_string(rank()) + ": communicator closed");
      return Request(completion);
    }
    std::unique_ptr<Lane>& slot = lanes_[group];
    if (!slot) slot = std::make_unique<Lane>();
    lane = slot.get();
    if (lane->idle == 0 &&
        lane->threads.size() < static_cast<size_t>(options_.all_reduces_in_flight)) {
      lane->threads.emplace_back([this, lane] { lane_loop(*lane); });
    }
    const uint64_t sequence = lane->next_sequence++;
    lane->queue.emplace_back(
        [this, buffer, group, sequence] {
          if (buffer.size_bytes() <= options_.ring.direct_max_bytes) {
            direct_all_reduce(*this, buffer, group, sequence);
          } else {
            ring_all_reduce(*this, buffer, group, sequence, options_.ring);
          }
        },
        completion);
  }
  lane->wake.notify_one();
  return Request(completion);
}

void TcpCommunicator::lane_loop(Lane& lane) {
  std::unique_lock lock(mu_);
  while (true) {
    ++lane.idle;
    lane.wake.wait(lock, [&] { return closing_ || !lane.queue.empty(); });
    --lane.idle;
    if (closing_) return;
    Collective job = std::move(lane.queue.front());
    lane.queue.pop_front();
    lock.unlock();
    try {
      job.first();
      job.second->complete();
    } catch (const TransportError& e) {
      job.second->fail(std::string("all-reduce: ") + e.what());
    }
    lock.lock();
  }
}

void TcpCommunicator::close() {
  std::call_once(close_once_, [this] {
    std::deque<Collective> pending;
    {
      std::lock_guard lock(mu_);
      closing_ = true;
      for (auto& [group, lane] : lanes_) {
        for (Collective& job : lane->queue) pending.push_back(std::move(job));
        lane->queue.clear();
        lane->wake.notify_all();
      }
    }
    for (auto& job : pending) {
      job.second->fail("rank " + std::to_string(rank()) + ": communicator closed");
    }
    // Closing the peers fails the point-to-point operations of a running all-reduce, which
    // then ends, so the lanes' threads can be joined. No lane is added once closing_ is set.
    for (auto& p : peers_) {
      if (p) p->close();
    }
    for (auto& [group, lane] : lanes_) {
      for (std::thread& thread : lane->threads) thread.join();
    }
  });
}

}  // namespace tessel::transport
