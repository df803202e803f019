// The placement's Topology of a job's candidate GPUs across member clusters: one site per node
// (its GPUs share the node's fast link), the links between nodes from the prober's
// net.tessel.dev/links annotations (api/link_annotations.h), and, for the pairs no prober has
// measured, an estimate from the nodes' regions and zones, counted and named so the job's
// conditions can say how much of its placement rests on estimates.
//
// Directions: a node's annotation holds what it measured towards each peer; the placement's
// site pairs are undirected. Each direction A -> B is A's measurement of B by name, else A's
// aggregate for B's site ("*" when B is in A's cluster, "<B's cluster>/*" otherwise; a named
// measurement always wins), else missing. A pair's link is the worse of its directions found:
// the larger one-way latency and the smaller bulk bandwidth, since a pipeline hop (activations
// one way, gradients back) and a ring all-reduce (every node sends and receives) both go at the
// pace of their slower direction. A pair with no direction found is estimated.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "operator/controller/candidate_nodes.h"
#include "placement/topology.h"

namespace tessel::controller {

// Links assumed where nothing was measured. Deliberately modest: an estimate should not lure
// the placement onto a link that has not shown its speed.
struct LinkEstimates {
  placement::Link same_node{0.005, 400};    // GPUs of one node (NVLink or PCIe switch)
  placement::Link same_zone{0.1, 25};       // one data center
  placement::Link same_region{1.0, 10};     // zones of one region
  placement::Link other_region{50.0, 1.0};  // across regions, or where a region is unknown
};

// Which measurements are recent enough to be taken as the link's. An older one (the prober of
// that node stopped, or its node stopped renewing it) is taken as missing: the pair is
// estimated and a note says so. So is one dated in the future beyond the clock skew allowed
// (a node's clock that is wrong, or a node keeping its numbers "fresh" forever).
struct LinkFreshness {
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
  std::chrono::seconds max_age = std::chrono::hours(1);
  std::chrono::seconds max_clock_skew = std::chrono::minutes(5);
};

// A node whose net.tessel.dev/links annotation was refused: its own measurements are not used.
struct RejectedLinks {
  std::string cluster, node;
  // The first of api::parse_node_links's errors, with how many more: a few hundred bytes at most
  // (parse_node_links shortens the names it quotes), short enough for an Event's note.
  std::string reason;
};

// A node's site name in the topology (and in pair_sources, status.placement.links):
// "<cluster>/<node>".
std::string site_name(const std::string& cluster, const std::string& node);

// Where a device (an index of the topology) is: cluster, node, and the GPU's index among the
// node's free GPUs.
struct DevicePlace {
  std::string cluster, node;
  int gpu = 0;
};

// Where the link of a node pair came from.
enum class LinkSource { kMeasured, kAggregated, kEstimated };
const char* link_source_name(LinkSource source);  // "measured", "aggregated", "estimated"

struct ClusterTopology {
  placement::Topology topology;     // finalized
  std::vector<DevicePlace> places;  // by device id
  int measured_pairs = 0;           // node pairs with a measurement (named or aggregate) either way
  int aggregated_pairs = 0;         // of those, pairs with a direction taken from an aggregate
  int estimated_pairs = 0;          // node pairs estimated from regions and zones
  int stale_measurements = 0;       // directional measurements older than max_age (or future)
  std::vector<RejectedLinks> rejected;  // nodes whose annotation was refused, in node order
  // What was not taken as measured, with the cause: "member-a/gpu-3: metadata.annotations[...]:
  // ... (its links are estimated)", "member-b/gpu-9: unknown GPU product 'X' (taken as V100)";
  // last, when aggregated_pairs > 0, one note saying how many pairs rest on aggregates and whose.
  std::vector<std::string> notes;
  // Per pair of distinct nodes, by their site names ("<cluster>/<node>") in name order.
  std::map<std::pair<std::string, std::string>, LinkSource> pair_sources;

  // The source of the link between two distinct nodes (either order); throws
  // std::out_of_range for a pair of unknown or equal sites.
  LinkSource source(const std::string& site_a, const std::string& site_b) const;
};

// Nodes of every member, each with free GPUs (candidate_nodes). Throws
// placement::TopologyError when the result breaks a topology limit (e.g. more than
// placement::kMaxDevices GPUs), std::invalid_argument when `freshness` has a max_age <= 0 or a
// negative max_clock_skew. An annotation that fails api::parse_node_links is a note and a
// `rejected` entry; measurements that are not fresh (aggregates as named ones) are a note per
// node, and taken as missing.
ClusterTopology build_cluster_topology(const std::vector<GpuNode>& nodes,
                                       const LinkEstimates& estimates = {},
                                       const LinkFreshness& freshness = {});

}  // namespace tessel::controller
