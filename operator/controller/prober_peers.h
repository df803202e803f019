// The cross-cluster peers ConfigMap (api/prober_peers.h) the operator wants in each member, from
// what the member registry's informers hold: each member lists the probers of every other
// member, "<member>/<node>", reached at the Node's ExternalIP when it has one (probers run on
// the host network: that is the address another cluster can dial), else at the pod's IP. Pure.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/prober_peers.h"

namespace tessel::controller {

inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kManagedByOperator = "tessel-operator";

// The Node's first status.addresses entry of type ExternalIP; nullopt when it has none.
std::optional<std::string> external_ip(const nlohmann::json& node);

// The probers of `member` as the other members list them. external_ips: node name -> its
// ExternalIP, for the nodes that have one.
std::vector<api::ProberPeer> member_probers(const std::string& member,
                                            const std::vector<api::ProberEndpoint>& endpoints,
                                            const std::map<std::string, std::string>& external_ips);

struct DesiredProberPeers {
  api::ProberPeers peers;
  // Peers beyond api::kMaxProberPeers or api::kMaxProberPeersBytes, left off the end of the
  // list (in name order): the caller warns.
  std::size_t left_out = 0;
};

// The list of `member`: the probers of every other member of `probers` (member -> its probers),
// sorted by name, within the format's limits.
DesiredProberPeers prober_peers_for(
    const std::string& member, const std::map<std::string, std::vector<api::ProberPeer>>& probers);

// The ConfigMap api::kProberPeersConfigMap in `ns` holding `peers`, labelled managed-by
// tessel-operator and tessel.dev/hub=<hub_id>.
nlohmann::json prober_peers_configmap(const std::string& ns, const std::string& hub_id,
                                      const api::ProberPeers& peers);

}  // namespace tessel::controller
