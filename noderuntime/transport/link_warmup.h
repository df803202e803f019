// Warming a long fat link's streams before the first message (issue 20): both ends send a few
// windows of bulk data on every stream at once, and read (and drop) the other end's.
//
// Why: bbr (the default congestion control of many hosts) paces a connection at the bandwidth
// it has seen delivered, and it only lowers that estimate from samples that were not limited by
// the application. A pipeline's messages come in bursts with idle time between them, so every
// sample of a fresh connection is application-limited and small: over 150 ms and 1 Gbit/s the
// streams kept an estimate of 4.7 Mbit/s and paced each 131 KB message over ~80 ms
// (docs/benchmarks.md). Bulk data teaches it the link's rate, which the bursts then never lower.
// Loss-based congestion controls gain a grown window (until an idle restart, when
// net.ipv4.tcp_slow_start_after_idle is 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "noderuntime/transport/mesh.h"
#include "noderuntime/transport/socket.h"

namespace tessel::transport {

// Windows of warm-up data per stream: enough for bbr's startup to measure the stream's share of
// the link (its delivery rate doubles each round trip until the link is full).
inline constexpr uint64_t kWarmupWindows = 2;

// What each end sends on each stream of `link`: kWarmupWindows x its socket buffers when they
// were sized from the bandwidth-delay product (a long fat link), else 0 (no warm-up). Both ends
// know the buffer size (the connecting end sends it in its hello), so both agree.
uint64_t warmup_bytes_per_stream(const MeshLink& link);

// Warms the links to `peers` (ranks; others are left alone) whose warmup_bytes_per_stream is not
// 0, all at once (a rank warms all its links together, so that no two ranks wait on each other).
// `names` names each peer (index = rank). Throws TransportError naming the peer and the stream
// when a stream fails or `deadline` passes, or when a peer is not a rank with a link.
void warm_up_links(std::vector<MeshLink>& links, const std::vector<int>& peers,
                   const std::vector<std::string>& names, SteadyTime deadline);

}  // namespace tessel::transport
