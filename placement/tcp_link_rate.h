// The rate a TCP link can carry (issue 20). One TCP stream moves at most its window per round
// trip, whatever the link's capacity, so a link of `streams` streams of `window_bytes` each over
// a round trip of rtt_s carries at most
//     usable rate = min(capacity, streams x window / RTT),
// and it takes streams_to_fill = ceil(BDP / window) streams (BDP = capacity x RTT) to fill it.
// The transport picks its streams per link by this rule (noderuntime/transport/stream_plan.h),
// and the topology applies the same bound to its links (Topology::tcp), so the planner and the
// simulator see the rate the transport can reach. Header-only: the transport uses it too.
#pragma once

#include <algorithm>
#include <cmath>

namespace tessel::placement {

constexpr int kMaxTcpStreamsPerLink = 16;

// ceil(bdp_bytes / window_bytes), at least 1 and at most max_streams; 1 when the window is
// unknown (0) or the BDP fits one window.
inline int streams_to_fill(double bdp_bytes, double window_bytes,
                           int max_streams = kMaxTcpStreamsPerLink) {
  if (!(window_bytes > 0) || !(bdp_bytes > window_bytes)) return 1;
  return static_cast<int>(std::min<double>(max_streams, std::ceil(bdp_bytes / window_bytes)));
}

// min(capacity, streams x window / RTT) in bytes/s; the capacity itself when the round trip
// or the window is 0 (not bound).
inline double usable_rate_bytes_per_s(double capacity_bytes_per_s, double rtt_s, int streams,
                                      double window_bytes) {
  if (!(rtt_s > 0) || !(window_bytes > 0)) return capacity_bytes_per_s;
  return std::min(capacity_bytes_per_s, streams * window_bytes / rtt_s);
}

}  // namespace tessel::placement
