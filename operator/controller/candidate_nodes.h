// The GPUs a job may use in one member cluster: its Ready, schedulable nodes that match the
// job's GPU selector, each with its allocatable nvidia.com/gpu less what pods on it already
// hold. Pure: it reads the Nodes and Pods the member's informers hold.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/label_selector.h"
#include "api/pod_template.h"
#include "operator/controller/labels.h"

namespace tessel::controller {

using api::kGpuResource;
inline constexpr const char* kGpuProductLabel = "nvidia.com/gpu.product";
inline constexpr const char* kRegionLabel = "topology.kubernetes.io/region";
inline constexpr const char* kZoneLabel = "topology.kubernetes.io/zone";

// One node with GPUs free for the job.
struct GpuNode {
  std::string cluster;  // the MemberCluster
  std::string name;     // the Node
  std::string region;   // its region label, else the MemberCluster's spec.region
  std::string zone;
  std::string gpu_product;  // nvidia.com/gpu.product, "" when not labelled
  int free_gpus = 0;
  std::map<std::string, std::string> annotations;
};

// A node left out, and why ("not Ready", "cordoned", "no free nvidia.com/gpu (8 held of 8)",
// "does not match spec.placement.gpuSelector"), for the job's conditions and Events.
struct ExcludedNode {
  std::string cluster, name, reason;
};

struct Candidates {
  std::vector<GpuNode> nodes;  // in node name order
  std::vector<ExcludedNode> excluded;
  int free_gpus() const;
};

// nodes and pods: the member's Node and Pod objects (as JSON). Pods that are bound to a node
// and not finished hold their GPU requests; pods in `ignore_owner_job` (this job's own, when
// it is re-placed; their kJobUidLabel) are not counted against it.
Candidates candidate_nodes(const std::string& cluster, const std::string& cluster_region,
                           const std::vector<nlohmann::json>& nodes,
                           const std::vector<nlohmann::json>& pods,
                           const api::LabelSelector& gpu_selector,
                           const std::string& ignore_owner_job = "");

// The GPUs a pod holds: max(sum over its containers, largest init container), from requests
// or, where a container gives only limits, its limits (extended resources have requests ==
// limits). Quantities that are not whole numbers count as 0 (the API server refuses them).
int pod_gpu_request(const nlohmann::json& pod);

// A node's allocatable nvidia.com/gpu; 0 when absent or not a whole number.
int node_gpu_allocatable(const nlohmann::json& node);
// Its Ready condition is True.
bool node_ready(const nlohmann::json& node);

}  // namespace tessel::controller
