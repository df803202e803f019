// The Node annotation the prober writes on its own Node and the operator reads: what that node
// measured to each of its peers, in its cluster and across clusters. One format, defined here
// only, with no Kubernetes calls (the prober and the operator both use it):
//
//   net.tessel.dev/links: {"version": 1, "peers": {
//       "gpu-node-2": {"rttMs": [0.21, 0.35], "gbps": [0.9, 9.4], "at": "2026-11-26T00:12:03Z"},
//       "member-b/gpu-node-7": {"rttMs": [48.0, 51.2], "gbps": [0.05, 0.8], "streams": [5, 0.19],
//                               "at": "..."},
//       "*": {...}, "member-c/*": {...}}}
//
// A peer is a node of the same cluster ("<node>") or of another ("<cluster>/<node>"). rttMs is
// the round trip's median and 90th percentile in milliseconds; gbps the throughput from this
// node to the peer in Gbit/s with small messages (pipeline activations) and in bulk (gradient
// all-reduce); at when it was measured (RFC 3339). Measurements are directional: the peer
// writes the other direction on its own Node. streams (optional): a bulk rate measured over
// several TCP streams, as the transport uses them on a long fat link: their count and one
// stream's rate in Gbit/s (its window per round trip); absent, the bulk rate is one stream's.
//
// Aggregates (a node with more peers than it lists by name): "*" stands for every node of the
// writer's own cluster that is not listed by name, "<cluster>/*" for every node of that cluster
// not listed by name. An aggregate's rttMs and gbps are the median of each field over the
// aggregated peers, its `at` the oldest of theirs (aggregate_measurements). One aggregate per
// site at most; "*" is the only spelling of the writer's own cluster ("<own cluster>/*" is
// refused), and '*' means nothing anywhere else in a name. A reader takes an aggregate as the
// link to a node only when the writer did not list that node by name.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

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
  // The TCP streams bulk_gbps was measured over and, when more than one, one stream's rate
  // (0 for one stream: that is bulk_gbps).
  int streams = 1;
  double stream_gbps = 0;

  // What the placement's cost model reads: one-way latency (half the median round trip) and
  // the bulk rate.
  placement::Link link() const { return {rtt_p50_ms / 2, bulk_gbps}; }
  bool operator==(const LinkMeasurement&) const = default;
};

struct NodeLinks {
  // "<node>", "<cluster>/<node>", or an aggregate: "*", "<cluster>/*"
  std::map<std::string, LinkMeasurement> peers;
  bool operator==(const NodeLinks&) const = default;
};

// Parses an annotation value, written by a node that may be broken or hostile. Every bound is
// checked (size, version, peer count and names, aggregate names, no peer naming the node itself
// nor an aggregate naming its own cluster as "<cluster>/*", finite values in
// the physical ranges of placement/limits.h, p90 >= p50, an RFC 3339 `at`; small <= bulk is not
// required); throws ManifestError(node, {"metadata.annotations[net.tessel.dev/links]...", why}),
// at most 20 errors listed. `node` is "<node>" or "<cluster>/<node>". How old `at` is, is the
// reader's to judge (controller::build_cluster_topology takes old measurements as missing).
NodeLinks parse_node_links(const std::string& value, const std::string& node);
// An RFC 3339 time ("2026-11-26T00:12:03Z", "2026-11-26T01:12:03.25+01:00"), to the second;
// nullopt when `text` is not one (or names no real date).
std::optional<std::chrono::sys_seconds> parse_measured_at(const std::string& text);
// Digits a value keeps in the annotation: a measurement is not more precise than that, and the
// annotation of a node with thousands of peers must stay small.
inline constexpr int kSignificantDigits = 4;
// `value` to kSignificantDigits significant digits, as the double nearest its decimal text (so
// that 0.21 stays 0.21 and a value read back from the annotation equals the one written).
double significant(double value);
// The annotation value (compact JSON, peers in name order, every value rounded to
// kSignificantDigits significant digits); parse_node_links(format(x)) == x when x's values have
// no more digits than that.
std::string format_node_links(const NodeLinks& links);

// Whether a peer name is an aggregate ("*" or "<cluster>/*").
bool is_aggregate(const std::string& peer);
// The aggregate that stands for a named peer's site: "*" for "<node>" (the writer's cluster),
// "<cluster>/*" for "<cluster>/<node>".
std::string site_aggregate(const std::string& peer);
// An aggregate's entry from the measurements of the peers it stands for: the median of each field
// (of an even count, the mean of the two middle values) to kSignificantDigits (the stream count
// rounded down), `at` the oldest of theirs. Throws std::invalid_argument when `measurements` is empty or an `at` is not an
// RFC 3339 time.
LinkMeasurement aggregate_measurements(const std::vector<LinkMeasurement>& measurements);

}  // namespace tessel::api
