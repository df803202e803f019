// How many TCP connections ("streams") a peer link gets, and how large their socket buffers are
// (issue 20). One TCP stream moves at most its window per round trip, and its window is bounded
// by its socket buffers, which the system caps (net.core.wmem_max / rmem_max): with 4 MiB caps a
// stream over a 150 ms round trip tops out near 4 MiB / 0.15 s = 28 MB/s, whatever the link's
// capacity. A link whose bandwidth-delay product (capacity x RTT) exceeds one stream's window
// therefore gets N = ceil(BDP / window) streams, capped at max_streams, each with buffers of
// its share of the BDP (plus headroom) within the caps. Short links get one stream and the
// kernel's own buffer autotuning.
//
// The rule itself (N = ceil(BDP / window), rate = min(capacity, N x window / RTT)) is
// placement/tcp_link_rate.h's, which the planner applies to the topology's links too.
//
// Window of a buffer request: Linux grants SO_SNDBUF/SO_RCVBUF of v as 2v and keeps about half
// of it for its own bookkeeping, so a request of v yields a usable window of about v; the
// transport also clamps the window to v (set_socket_buffers), so that the streams of a link have
// at most streams x v in flight where the kernel keeps the clamp (6.18 does not once data flows:
// about 1.25 v each there, docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <string>

#include "placement/tcp_link_rate.h"

namespace tessel::transport {

constexpr int kMaxStreamsPerLink = placement::kMaxTcpStreamsPerLink;
// At or below this bandwidth-delay product the kernel's autotuning (net.ipv4.tcp_wmem/rmem)
// already fills the link: buffers are left alone.
constexpr uint64_t kAutotunedWindowBytes = 1 << 20;
// Buffers ask for this much more than their share of the BDP, for the kernel's overhead.
constexpr double kBufferHeadroom = 1.25;

struct SocketBufferLimits {
  uint64_t wmem_max = 212992;  // net.core.wmem_max: the largest SO_SNDBUF a process may set
  uint64_t rmem_max = 212992;  // net.core.rmem_max: the largest SO_RCVBUF
};

// Reads /proc/sys/net/core/wmem_max and rmem_max; a value that cannot be read keeps the Linux
// default above.
SocketBufferLimits read_socket_buffer_limits();

// Reads net.ipv4.tcp_slow_start_after_idle of the calling thread's network namespace: true for
// 1, the Linux default, or when it cannot be read. With it a stream idle for longer than its
// retransmission timeout (about one RTT) restarts from 10 segments, so on a long fat link an
// all-reduce after a training step's compute spends round trips refilling the window: 711-737
// ms instead of 644-675 ms for 64 MiB at n = 2, 150 ms, 1 Gbit/s, after 1 s idle
// (bench/transport/results.md). Per network namespace, not per socket: the transport can only
// say so.
bool read_slow_start_after_idle();

struct StreamPlan {
  int streams = 1;
  uint64_t buffer_bytes = 0;  // SO_SNDBUF and SO_RCVBUF of every stream; 0: kernel autotuning
  double bdp_bytes = 0;       // capacity x RTT; 0 when either is unknown
  // The sysctl that keeps one stream's buffer below the link's BDP ("net.core.wmem_max" or
  // "net.core.rmem_max"), "" when none does.
  std::string capped_by;
  // The rate the plan's streams can carry at most: streams x window / RTT (0: not bound).
  double window_bound_bytes_per_s = 0;
};

// capacity_bytes_per_s and rtt_s describe the link (0: unknown, then the BDP is unknown and the
// link gets one stream unless configured). configured_streams: 0 chooses, 1..max_streams is
// taken as given. Throws TransportError for a configured count or max_streams outside
// [1, kMaxStreamsPerLink] or a negative or non-finite capacity or RTT.
StreamPlan plan_link_streams(double capacity_bytes_per_s, double rtt_s, int configured_streams,
                             const SocketBufferLimits& limits,
                             int max_streams = kMaxStreamsPerLink);

// "5 streams, buffers 4.7 MB (BDP 18.8 MB; net.core.wmem_max caps one stream at 4.2 MB)"
std::string describe(const StreamPlan& plan);

}  // namespace tessel::transport
