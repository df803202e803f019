// The Node annotation the prober writes on its own Node and the operator reads: what that node
// measured to each of its peers, in its cluster and across clusters. One format, defined here
// only, with no Kubernetes calls (the prober and the operator both use it):
//
//   net.tessel.dev/links: {"version": 1, "peers": {
//       "gpu-node-2":          {"rttMs": [0.21, 0.35], "gbps": [0.9, 9.4], "at":
//       "2026-11-26T00:12:03Z"}, "member-b/gpu-node-7": {"rttMs": [48.0, 51.2], "gbps": [0.05,
//       0.8], "at": "..."}}}
//
// A peer is a node of the same cluster ("<node>") or of another ("<cluster>/<node>"). rttMs is
// the round trip's median and 90th percentile in milliseconds; gbps the throughput from this
// node to the peer in Gbit/s with small messages (pipeline activations) and in bulk (gradient
// all-reduce); at when it was measured (RFC 3339). Measurements are directional: the peer
// writes the other direction on its own Node.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "placement/topology.h"

namespace tessel::api {

inline constexpr const char* kLinksAnnotation = "net.tessel.dev/links";
// Kubernetes refuses more than 256 KiB of annotations on one object; a node's measurements
// must leave room for the others (about 110 bytes a peer: 2000 peers).
inline constexpr size_t kMaxLinksAnnotationBytes = 224 * 1024;

struct LinkMeasurement {
  double rtt_p50_ms = 0;
  double rtt_p90_ms = 0;
  double small_gbps = 0;
  double bulk_gbps = 0;
  std::string measured_at;  // RFC 3339

  // What the placement's cost model reads: one-way latency (half the median round trip) and
  // the bulk rate.
  placement::Link link() const { return {rtt_p50_ms / 2, bulk_gbps}; }
  bool operator==(const LinkMeasurement&) const = default;
};

struct NodeLinks {
  std::map<std::string, LinkMeasurement> peers;  // "<node>" or "<cluster>/<node>"
  bool operator==(const NodeLinks&) const = default;
};

// Parses an annotation value, written by a node that may be broken or hostile. Every bound is
// checked (size, version, peer count and names, no peer naming the node itself, finite values in
// the physical ranges of placement/limits.h, p90 >= p50, an RFC 3339 `at`; small <= bulk is not
// required); throws ManifestError(node, {"metadata.annotations[net.tessel.dev/links]...", why}),
// at most 20 errors listed. `node` is "<node>" or "<cluster>/<node>". How old `at` is, is the
// reader's to judge (controller::build_cluster_topology takes old measurements as missing).
NodeLinks parse_node_links(const std::string& value, const std::string& node);
// An RFC 3339 time ("2026-11-26T00:12:03Z", "2026-11-26T01:12:03.25+01:00"), to the second;
// nullopt when `text` is not one (or names no real date).
std::optional<std::chrono::sys_seconds> parse_measured_at(const std::string& text);
// The annotation value (compact JSON, peers in name order); parse_node_links(format(x)) == x.
std::string format_node_links(const NodeLinks& links);

}  // namespace tessel::api
