// The TCP backend of Communicator: a full mesh of links set up at start (mesh.h), each of one or
// more TCP streams (stream_plan.h: a long fat link gets several, its socket buffers sized from
// its bandwidth-delay product), one TcpPeer (a sender and a receiver thread per stream) per
// peer, every outgoing link optionally shaped by
// the link emulator, and the all-reduce (ring_allreduce.h; direct_all_reduce.h for buffers up
// to RingOptions::direct_max_bytes) run on one lane per group: the all-reduces of different
// groups (a stage's data-parallel group, the tied-embedding group, the whole world) proceed side
// by side, so a slow group never holds up another.
//
// A lane starts its group's all-reduces in call order and runs up to all_reduces_in_flight of
// them at once (a thread each, started as needed), as NCCL's and PyTorch DDP's gradient buckets
// overlap: over a long link each ring pays the round trip at its start and its end, and the
// rings of a step's buckets pay it side by side instead of one after another. The rings share
// the links' streams; each message is keyed by its collective's sequence number and its chunk
// (ring_allreduce.h), so interleaving them on a stream mixes no ring's messages with another's.
// Each all-reduce sums in its own ring order, so its result is bit-identical on every member and
// the same as when it runs alone. Requests complete in whatever order the rings finish (the
// callers wait for each request they need). Each fails on its own: a failed all-reduce fails its
// request naming the peer, and the others go on (those over a failed link fail too, each naming
// it). Deadlock-free because every member starts them in the same order: the lowest-numbered
// unfinished all-reduce is running on every member (a member whose lane is full runs only
// lower-numbered ones, so it has started it), and nothing it waits for depends on another.
//
// Start-up with kernel-chosen ports: every rank binds its TcpListener first (port 0), the
// ports are gathered into `peers`, then every rank constructs its TcpCommunicator.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/transport/communicator.h"
#include "noderuntime/transport/link_emulator.h"
#include "noderuntime/transport/peer_address.h"
#include "noderuntime/transport/ring_allreduce.h"
#include "noderuntime/transport/socket.h"
#include "noderuntime/transport/stream_plan.h"
#include "noderuntime/transport/tcp_peer.h"

namespace tessel::transport {

// Every gradient bucket of a small model's step at once (7 for fables' 4 blocks: 0.69-0.79 s a
// step over 50 ms against 0.75-0.78 s with 4 and 1.02-1.04 s with 1, bench/transport/results.md);
// a large model's buckets are bandwidth-bound, and each running one holds a receive window.
inline constexpr int kDefaultAllReducesInFlight = 8;
// Each running all-reduce is a thread, a receive window and the messages of its ring that arrive
// ahead of that window.
inline constexpr int kMaxAllReducesInFlight = 64;

struct TcpOptions {
  uint64_t job_id = 0;
  int rank = 0;
  std::vector<PeerAddress> peers;                    // index = rank; the world size is peers.size()
  std::chrono::milliseconds connect_timeout{30000};  // for the whole mesh set-up
  // A receive waiting on a peer that sends nothing, or a send the peer does not read, for this
  // long fails the peer.
  std::chrono::milliseconds io_timeout{30000};
  std::optional<LinkEmulator> links;  // shapes of the links; nullopt: unshaped
  size_t burst_bytes = kDefaultBurstBytes;
  RingOptions ring;  // the same on every rank
  // TCP streams per peer link (the connecting, higher rank of a pair decides; issue 20): 0
  // chooses per link from link_capacity and the round trip the kernel measured while
  // connecting (plan_link_streams); 1..kMaxStreamsPerLink applies to every link.
  int streams_per_link = 0;
  // Each peer's link capacity in bytes/s, index = rank (e.g. the topology's bandwidth); empty
  // or 0: unknown, and a link whose streams are not configured gets one.
  std::vector<double> link_capacity;
  // The limits the plans respect; default: read from /proc/sys/net/core when connecting.
  std::optional<SocketBufferLimits> buffer_limits;
  // The all-reduces of one group that run at once (1: one after another); each running one holds
  // a thread and its ring's receive window (RingOptions::window x chunk_bytes).
  int all_reduces_in_flight = kDefaultAllReducesInFlight;
  // Whether net.ipv4.tcp_slow_start_after_idle is on, for the link lines; default: read when
  // connecting (read_slow_start_after_idle).
  std::optional<bool> slow_start_after_idle;
  // The peers whose long fat links are warmed with a few windows of bulk data before the first
  // message (link_warmup.h): a pipeline's neighbours, whose bursts of activations never teach
  // bbr the link's rate (without it each 131 KB message was paced over ~80 ms at 150 ms). Not
  // the data-parallel peers: their all-reduces are bulk and teach it themselves, and warming a
  // 4-rank ring's links as well made its all-reduces lossier over the emulator. The two ends of
  // a link must agree. Empty: none.
  std::vector<int> warm_up_peers;
  size_t min_piece_bytes = kDefaultMinPieceBytes;  // see tcp_peer.h
  // The largest message a peer may send this rank (see tcp_peer.h); a bigger one fails its link.
  uint64_t max_message_bytes = kDefaultMaxMessageBytes;
  // Told one line per link of several streams, whose buffers the system caps, or whose BDP
  // slow start after idle would cost round trips; default: a line on stderr.
  std::function<void(const std::string&)> log;
};

class TcpCommunicator final : public Communicator {
 public:
  // Connects the mesh through `listener` (this rank's bound socket). Throws TransportError
  // naming the peer that could not be reached or was rejected, or the invalid option.
  TcpCommunicator(TcpOptions options, const TcpListener& listener);
  ~TcpCommunicator() override;

  int rank() const override { return options_.rank; }
  // The streams of the link to `peer` (0 at this rank).
  int streams_to(int peer) const;
  int size() const override { return static_cast<int>(options_.peers.size()); }
  // Throw TransportError at once for a peer out of range or equal to rank(), or a buffer whose
  // size is not payload_bytes_of(info).
  Request isend(int peer, const TensorInfo& info, std::span<const std::byte> payload) override;
  Request irecv(int peer, const TensorInfo& expected, std::span<std::byte> buffer) override;
  // f32 only for now; throws TransportError at once for another dtype or an invalid group.
  Request iall_reduce(void* data, size_t count, DType dtype, const std::vector<int>& group,
                      ReduceOp op = ReduceOp::kSum) override;
  void close() override;

 private:
  using Collective = std::pair<std::function<void()>, std::shared_ptr<Completion>>;
  // One group's collectives, taken in call order by the lane's threads (up to
  // all_reduces_in_flight, started as needed), one each at a time.
  struct Lane {
    std::deque<Collective> queue;
    std::condition_variable wake;
    uint64_t next_sequence = 0;
    int idle = 0;  // threads waiting for a collective
    std::vector<std::thread> threads;
  };

  TcpPeer& peer(int rank, const char* operation);
  void lane_loop(Lane& lane);

  const TcpOptions options_;
  std::vector<std::unique_ptr<TcpPeer>> peers_;  // null at this rank

  std::mutex mu_;
  std::map<std::vector<int>, std::unique_ptr<Lane>> lanes_;  // by group, started on first use
  bool closing_ = false;
  std::once_flag close_once_;
};

}  // namespace tessel::transport
