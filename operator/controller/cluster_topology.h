// The placement's Topology of a job's candidate GPUs across member clusters: one site per node
// (its GPUs share the node's fast link), the links between nodes from the prober's
// net.tessel.dev/links annotations (api/link_annotations.h), and, for the pairs no prober has
// measured, an estimate from the nodes' regions and zones, counted and named so the job's
// conditions can say how much of its placement rests on estimates.
#pragma once

#include <string>
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

// Where a device (an index of the topology) is: cluster, node, and the GPU's index among the
// node's free GPUs.
struct DevicePlace {
  std::string cluster, node;
  int gpu = 0;
};

struct ClusterTopology {
  placement::Topology topology;     // finalized
  std::vector<DevicePlace> places;  // by device id
  int measured_pairs = 0;           // node pairs with a measurement in either direction
  int estimated_pairs = 0;          // node pairs estimated from regions and zones
  // What was not taken as measured, with the cause: "member-a/gpu-3: metadata.annotations[...]:
  // ... (its links are estimated)", "member-b/gpu-9: unknown GPU product 'X' (taken as V100)".
  std::vector<std::string> notes;
};

// Nodes of every member, each with free GPUs (candidate_nodes). Throws
// placement::TopologyError when the result breaks a topology limit (e.g. more than
// placement::kMaxDevices GPUs); measurements that fail api::parse_node_links are notes.
ClusterTopology build_cluster_topology(const std::vector<GpuNode>& nodes,
                                       const LinkEstimates& estimates = {});

}  // namespace tessel::controller
