// The GPU nodes of an e2e run: one process kubelet per member cluster, each playing a few GPU
// nodes there (registered through the member's API, so the same on a test server and on a real
// cluster), labelled as GPU nodes are (nvidia.com/gpu.product, topology.kubernetes.io/region and
// zone) and annotated with the prober's link measurements (net.tessel.dev/links) of a topology
// in which the nodes inside a cluster are joined by fast links and the clusters by a slow one.
// Every node also carries the run's label, so that jobs select only this run's nodes
// (spec.placement.gpuSelector) on a real cluster that has others.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/link_annotations.h"
#include "kube/client.h"
#include "tests/support/process_kubelet.h"

namespace tessel::testing {

// The label every node (and MemberCluster) of one e2e run carries, valued with the run's id.
inline constexpr const char* kRunLabel = "e2e.tessel.dev/run";

// The measured links the fleet writes: inside a cluster, and between two clusters.
inline constexpr double kFastLinkRttMs = 0.2;
inline constexpr double kFastLinkGbps = 100;
inline constexpr double kSlowLinkRttMs = 40;
inline constexpr double kSlowLinkGbps = 0.5;

// What a fleet is given beyond its members.
struct FleetOptions {
  std::string stage_binary;  // what stage containers (image tessel/stage, any tag) run
  // Write the prober's annotation (the topology above) on every node; off when real probers run
  // on the nodes and write their own.
  bool write_links = true;
  // More images the kubelets run, image (any tag) -> executable (e.g. tessel/prober).
  std::map<std::string, std::string> more_images;
  // Per node, in nodes() order, the network namespace the node lives in and its address there
  // (ProcessNodeOptions::network_namespace, address); empty: every node on the host's network.
  std::vector<std::pair<std::string, std::string>> node_networks;
};

struct FleetMember {
  std::string cluster;  // the MemberCluster's name: how other clusters' nodes name its nodes
  std::string region;   // topology.kubernetes.io/region of its nodes; zone is "<region>a"
  std::shared_ptr<kube::Client> client;
  int nodes = 0;
  int gpus_per_node = 0;
};

// A node of member `member`: "<cluster>-gpu<k>" (the cluster's name holds the run's id, so the
// name is unique in a shared cluster).
struct GpuNode {
  int member = 0;
  std::string name;
};

class GpuFleet {
 public:
  // Builds the nodes (names, labels, link annotations to every other node of the fleet unless
  // options.write_links is off) and a kubelet per member, whose container logs go to
  // <work_dir>/<cluster>. Nothing is registered until start().
  GpuFleet(std::vector<FleetMember> members, const std::string& run_id, const std::string& work_dir,
           const FleetOptions& options);
  // stop(), then deletes the nodes it registered (best effort: a real cluster keeps no
  // leftovers).
  ~GpuFleet();
  GpuFleet(const GpuFleet&) = delete;
  GpuFleet& operator=(const GpuFleet&) = delete;

  void start();  // registers every node and runs its pods
  void stop();   // kills every stage process (idempotent)

  const std::vector<GpuNode>& nodes() const { return nodes_; }
  int total_gpus() const;
  ProcessKubelet& kubelet(int member) { return *kubelets_.at(member); }

  // The annotation the fleet writes on `node` (what the prober would have measured there; empty
  // when options.write_links is off).
  const api::NodeLinks& links_of(const std::string& node) const;

 private:
  std::vector<FleetMember> members_;
  std::vector<GpuNode> nodes_;
  std::vector<api::NodeLinks> links_;  // per nodes_ entry
  std::vector<std::unique_ptr<ProcessKubelet>> kubelets_;
  bool started_ = false;
};

}  // namespace tessel::testing
