// What the plugin reads from the clusters, through their API servers only: a TrainingJob from
// the hub; the hub's MemberClusters, each one's kubeconfig Secret (in the operator's namespace,
// as the operator reads it: docs/operator.md) and that member's Nodes. Errors name the object,
// the namespace and the member.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/kubectl_tessel/links_matrix.h"
#include "kube/client.h"

namespace tessel::kubectl_tessel {

// The TrainingJob `name` in `ns`. Throws PluginError: not found (saying where it looked), or
// the API's refusal.
nlohmann::json read_job(kube::Client& hub, const std::string& ns, const std::string& name);

// Every MemberCluster of the hub with its GPU-bearing Nodes, or the reason it could not be read
// (its Secret missing, a kubeconfig refused, the member unreachable), one entry per member.
// Throws PluginError when the MemberClusters themselves cannot be listed, or there are none.
std::vector<MemberNodes> read_members(kube::Client& hub, const std::string& operator_namespace,
                                      const kube::ClientOptions& member_options);

}  // namespace tessel::kubectl_tessel
