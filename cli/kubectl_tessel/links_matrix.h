// `kubectl tessel links`: the bandwidth matrix the probers measured between the member
// clusters' GPU nodes, read from each Node's net.tessel.dev/links annotation
// (api/link_annotations.h). A cell is what the row's node measured towards the column's node:
// its own figure for that node by name, else its aggregate for that node's site ("*" in its
// own cluster, "<cluster>/*" in another), as the operator takes them
// (operator/controller/cluster_topology.h); else unmeasured.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::kubectl_tessel {

// A measurement older than this, or dated further in the future than the skew, the operator
// takes as missing: its defaults (controller::LinkFreshness, which cli/ does not include).
inline constexpr std::chrono::hours kOperatorLinkMaxAge{1};
inline constexpr std::chrono::minutes kOperatorClockSkew{5};

// One member cluster as read: its Nodes (the items of a NodeList), or why they could not be read.
struct MemberNodes {
  std::string cluster;
  std::vector<nlohmann::json> nodes;
  std::string error;  // non-empty: the member could not be read, `nodes` is empty
};

// The data both outputs show: nodes [{index, cluster, node, annotation: measured|absent|refused,
// reason (refused)}] (GPU nodes only, those of `only_cluster` when set, by cluster then name),
// columns [{index, name}] (every GPU node of every member read: the peers a row may have measured),
// links [{from, to, gbps, smallGbps, rttMs, rttP90Ms, source: measured|aggregated, at, stale}]
// (a row node's figure towards a column node; stale: too old at `now`, or too far ahead of it,
// for the operator to use), unreadable [{cluster, error}]. Throws PluginError when
// `only_cluster` names no member read.
nlohmann::json links_view(const std::vector<MemberNodes>& members, const std::string& only_cluster,
                          std::chrono::system_clock::time_point now);

// Rows are the nodes measuring, columns the nodes measured (numbered; the legend is the rows'
// labels), cells bulk Gbit/s ('-' unmeasured, '*' after a figure an aggregate gave, '?' after a
// stale one); with `rtt`, a second matrix of median round trips in ms. Columns wrap into blocks to
// fit `width`.
std::string render_links(const nlohmann::json& view, bool rtt, int width = 80);

}  // namespace tessel::kubectl_tessel
