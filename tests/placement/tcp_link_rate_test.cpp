// A link's usable rate under TCP (issue 20): min(capacity, streams x window / RTT), the streams
// that fill it, the topology's tcp block applying it to every link (parsed, written, checked),
// and a plan that changes because of it: a long fat link loses to a short thin one.
#include "placement/tcp_link_rate.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "placement/ring_allreduce.h"
#include "placement/topology.h"

namespace tessel::placement {
namespace {

constexpr double kMiB = 1 << 20;

TEST(TcpLinkRate, OneStreamMovesAWindowPerRoundTrip) {
  // Issue 20's example: 4 MiB over 200 ms is 21 MB/s, whatever the 10 Gbit/s capacity.
  EXPECT_DOUBLE_EQ(usable_rate_bytes_per_s(10e9 / 8, 0.2, 1, 4 * kMiB), 4 * kMiB / 0.2);
  EXPECT_DOUBLE_EQ(usable_rate_bytes_per_s(10e9 / 8, 0.2, 16, 4 * kMiB), 16 * 4 * kMiB / 0.2);
  // Enough streams: the capacity binds.
  EXPECT_DOUBLE_EQ(usable_rate_bytes_per_s(1e9 / 8, 0.15, 5, 4 * kMiB), 1e9 / 8);
  // No round trip or no window known: not bound.
  EXPECT_DOUBLE_EQ(usable_rate_bytes_per_s(1e9 / 8, 0, 1, 4 * kMiB), 1e9 / 8);
  EXPECT_DOUBLE_EQ(usable_rate_bytes_per_s(1e9 / 8, 0.15, 1, 0), 1e9 / 8);
}

TEST(TcpLinkRate, StreamsToFillAreTheBandwidthDelayProductOverTheWindow) {
  EXPECT_EQ(streams_to_fill(1e9 / 8 * 0.150, 4 * kMiB), 5);  // 18.75 MB / 4.19 MB
  EXPECT_EQ(streams_to_fill(1e9 / 8 * 0.050, 4 * kMiB), 2);
  EXPECT_EQ(streams_to_fill(1e9 / 8 * 0.001, 4 * kMiB), 1);
  EXPECT_EQ(streams_to_fill(10e9 / 8 * 0.250, 4 * kMiB), kMaxTcpStreamsPerLink);
  EXPECT_EQ(streams_to_fill(10e9 / 8 * 0.250, 4 * kMiB, 4), 4);
  EXPECT_EQ(streams_to_fill(1e9, 0), 1);
}

// Four devices at four sites: 0-1 and 2-3 short and thin, 0-3 and 1-2 short and medium, the
// diagonals 0-2 and 1-3 long (100 ms one way) and fat (100 Gbit/s).
std::string four_sites(const std::string& tcp) {
  return R"(format_version: 1
id: long-fat
units: {latency: ms, bandwidth: Gbit/s, compute: TFLOP/s}
gpu_types:
  T: {peak_tflops_fp16_tensor: 100.0, peak_tflops_fp32: 10.0, memory_gib: 16}
sites:
  - {name: a, kind: host}
  - {name: b, kind: host}
  - {name: c, kind: host}
  - {name: d, kind: host}
devices:
  - {id: 0, site: a, gpu: T, peak_tflops: 100.0}
  - {id: 1, site: b, gpu: T, peak_tflops: 100.0}
  - {id: 2, site: c, gpu: T, peak_tflops: 100.0}
  - {id: 3, site: d, gpu: T, peak_tflops: 100.0}
network:
  intra_site: {latency_ms: 0.01, bandwidth_gbps: 100.0}
  inter_site_default: null
  site_pairs:
    - {sites: [a, b], latency_ms: 5.0, bandwidth_gbps: 2.0}
    - {sites: [c, d], latency_ms: 5.0, bandwidth_gbps: 2.0}
    - {sites: [a, d], latency_ms: 5.0, bandwidth_gbps: 4.0}
    - {sites: [b, c], latency_ms: 5.0, bandwidth_gbps: 4.0}
    - {sites: [a, c], latency_ms: 100.0, bandwidth_gbps: 100.0}
    - {sites: [b, d], latency_ms: 100.0, bandwidth_gbps: 100.0}
)" + tcp;
}

TEST(TcpLinkRate, TheTopologysTcpBlockBoundsEveryLink) {
  const Topology ideal = parse_topology_yaml(four_sites(""), "ideal.yaml");
  EXPECT_DOUBLE_EQ(ideal.bandwidth_gbps(0, 2), 100.0);
  const Topology chosen = parse_topology_yaml(
      four_sites("  tcp: {window_bytes: 4194304, streams_per_link: 0}\n"), "tcp.yaml");
  // RTT 200 ms, BDP 2.5 GB: 16 streams (the cap) of 4 MiB carry 16 x 4 MiB / 0.2 s.
  EXPECT_NEAR(chosen.bandwidth_gbps(0, 2), 16 * 4 * kMiB / 0.2 * 8 / 1e9, 1e-9);
  EXPECT_NEAR(chosen.bandwidth_gbps(2, 0), chosen.bandwidth_gbps(0, 2), 1e-12);
  // The short links' BDP fits: their capacity stays.
  EXPECT_DOUBLE_EQ(chosen.bandwidth_gbps(0, 1), 2.0);
  const Topology one = parse_topology_yaml(
      four_sites("  tcp: {window_bytes: 4194304, streams_per_link: 1}\n"), "one.yaml");
  EXPECT_NEAR(one.bandwidth_gbps(1, 3), 4 * kMiB / 0.2 * 8 / 1e9, 1e-9);
  // The capacity is kept in the links themselves, and written back as given.
  const Topology again = parse_topology_yaml(topology_to_yaml(chosen), "rt");
  EXPECT_EQ(again, chosen);
  ASSERT_TRUE(again.tcp.has_value());
  EXPECT_EQ(again.tcp->window_bytes, 4194304.0);
}

TEST(TcpLinkRate, ALongFatLinksEffectiveRateChangesTheRing) {
  const auto ring_links = [](const Topology& topology) {
    const RingPlan ring = plan_ring(topology, {0, 1, 2, 3}, 1e9);
    std::set<std::pair<int, int>> links;
    for (size_t i = 0; i < ring.order.size(); ++i) {
      const int a = ring.order[i], b = ring.order[(i + 1) % ring.order.size()];
      links.insert({std::min(a, b), std::max(a, b)});
    }
    return std::pair{links, ring_allreduce_s(ring, 1e9)};
  };
  // Ideal links: the fat diagonals carry the ring (with the medium links).
  const auto [ideal, ideal_s] = ring_links(parse_topology_yaml(four_sites(""), "ideal.yaml"));
  EXPECT_TRUE(ideal.count({0, 2}) && ideal.count({1, 3})) << "diagonals expected";
  // A 1 MiB window: 16 streams carry 84 MB/s over 200 ms, less than the thin 2 Gbit/s links.
  const Topology tcp = parse_topology_yaml(
      four_sites("  tcp: {window_bytes: 1048576, streams_per_link: 0}\n"), "tcp.yaml");
  const auto [bound, bound_s] = ring_links(tcp);
  EXPECT_FALSE(bound.count({0, 2}) || bound.count({1, 3})) << "the diagonals kept";
  EXPECT_EQ(bound, (std::set<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 3}, {0, 3}}));
  EXPECT_GT(bound_s, ideal_s);
}

TEST(TcpLinkRate, TheTcpBlockIsCheckedNamingTheField) {
  const auto error = [](const std::string& tcp) -> std::string {
    try {
      parse_topology_yaml(four_sites(tcp), "t.yaml");
    } catch (const TopologyError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error("  tcp: {window_bytes: 0}\n"),
            "t.yaml: network.tcp.window_bytes: must be > 0, got 0");
  EXPECT_NE(error("  tcp: {window_bytes: 1e6, streams_per_link: 17}\n")
                .find("network.tcp.streams_per_link: must be in [0, 16] streams"),
            std::string::npos);
  EXPECT_NE(error("  tcp: {window: 1e6}\n").find("network.tcp.window: unknown key"),
            std::string::npos);
  EXPECT_NE(error("  tcp: {streams_per_link: 2}\n")
                .find("network.tcp.window_bytes: required field missing"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel::placement
