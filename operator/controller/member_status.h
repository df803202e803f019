// What a MemberCluster's status counts, from the Nodes and Pods its informers hold: the Ready,
// schedulable GPU nodes, their GPUs (allocatable, and free of any pod), and the probe coverage,
// i.e. how many of the directed pairs from its GPU nodes to every other GPU node of the
// federation carry a measurement in a valid net.tessel.dev/links annotation. Pure.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::controller {

// The names of the Ready, schedulable nodes with allocatable nvidia.com/gpu.
std::vector<std::string> usable_gpu_nodes(const std::vector<nlohmann::json>& nodes);

struct MemberCounts {
  int nodes = 0;       // usable GPU nodes
  int gpus_total = 0;  // their allocatable nvidia.com/gpu
  int gpus_free = 0;   // of those, not held by a pod bound there and not finished
  int measured_pairs = 0;
  int pairs = 0;  // from each usable GPU node here to every other usable GPU node anywhere

  // status.probeCoverage: "<measured>/<pairs>".
  std::string probe_coverage() const;
};

// cluster: the member's name (its nodes are peers "<cluster>/<node>" from elsewhere);
// nodes, pods: what its informers hold; elsewhere: the usable GPU nodes of every other member,
// by member name. A node whose annotation does not parse measures nothing.
MemberCounts count_member(const std::string& cluster, const std::vector<nlohmann::json>& nodes,
                          const std::vector<nlohmann::json>& pods,
                          const std::map<std::string, std::vector<std::string>>& elsewhere);

}  // namespace tessel::controller
