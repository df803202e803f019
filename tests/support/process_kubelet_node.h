// The Node side of the process kubelet: the Node a kubelet registers (labels, capacity,
// conditions, addresses), its heartbeat (a Lease in kube-node-lease, as a v1.26 kubelet
// renews), and what the node lifecycle controller of kube-controller-manager writes when a node
// stops responding. Every write goes through the Kubernetes API.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/client.h"

namespace tessel::testing {

struct ProcessNodeOptions {
  std::string name;
  int gpus = 0;  // capacity and allocatable nvidia.com/gpu (left out when 0)
  // The device IDs handed to containers, one per GPU; empty: "0" .. "<gpus - 1>".
  std::vector<std::string> gpu_devices;
  std::string cpu;     // capacity cpu, e.g. "16"; empty: this machine's CPU count
  std::string memory;  // capacity memory, e.g. "64Gi"; empty: this machine's memory
  int max_pods = 110;
  // Besides kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch (and their beta.
  // forms), which the kubelet sets; e.g. nvidia.com/gpu.product=NVIDIA-H200.
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  // The node's own network: a network namespace (its name under /var/run/netns, as `ip netns
  // add` makes it) that every container of the node's pods runs in, and the node's address in
  // it, which is its InternalIP and its pods' IP. Empty namespace: the host's network, as
  // today; empty address: ProcessKubeletOptions::address. A namespace needs its address.
  std::string network_namespace;
  std::string address;
};

// The Node the kubelet POSTs: apiVersion, kind, metadata (name, labels, annotations).
nlohmann::json node_object(const ProcessNodeOptions& node);

// The body of the status patch: capacity and allocatable (cpu, memory, pods, nvidia.com/gpu),
// the conditions MemoryPressure, DiskPressure, PIDPressure (False) and Ready (True,
// KubeletReady), addresses (InternalIP `address`, Hostname) and nodeInfo.
nlohmann::json node_status_patch(const ProcessNodeOptions& node, const std::string& address,
                                 std::chrono::system_clock::time_point now);

// A metav1.MicroTime: "2026-11-21T23:02:08.819817Z".
std::string format_micro_time(std::chrono::system_clock::time_point time);

// Creates the Node, or adds the labels and annotations to an existing one; writes its status;
// removes the node.kubernetes.io/not-ready and .../unreachable taints (the node lifecycle
// controller's part once the node is Ready); creates or renews its Lease.
void register_node(kube::Client& client, const ProcessNodeOptions& node, const std::string& address,
                   std::chrono::seconds lease_duration);

// Renews the node's Lease in kube-node-lease (creating it, owned by the Node, when missing).
void renew_node_lease(kube::Client& client, const std::string& node,
                      std::chrono::seconds lease_duration);

// What the node lifecycle controller does to a node whose kubelet stopped reporting: every
// condition becomes Unknown with reason NodeStatusUnknown, the taints
// node.kubernetes.io/unreachable NoSchedule and NoExecute are added, and the Ready condition of
// each of the node's pods that are not finished turns False (MarkPodsNotReady).
void mark_node_unreachable(kube::Client& client, const std::string& node);

}  // namespace tessel::testing
