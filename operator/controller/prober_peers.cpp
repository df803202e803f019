#include "operator/controller/prober_peers.h"

#include <algorithm>

#include "operator/controller/labels.h"

namespace tessel::controller {

using nlohmann::json;

std::optional<std::string> external_ip(const json& node) {
  const json status = node.value("status", json::object());
  const json addresses = status.is_object() ? status.value("addresses", json::array()) : json();
  if (!addresses.is_array()) return std::nullopt;
  for (const json& address : addresses) {
    if (!address.is_object() || address.value("type", json()) != "ExternalIP") continue;
    const json ip = address.value("address", json());
    if (ip.is_string() && !ip.get<std::string>().empty()) return ip.get<std::string>();
  }
  return std::nullopt;
}

std::vector<api::ProberPeer> member_probers(
    const std::string& member, const std::vector<api::ProberEndpoint>& endpoints,
    const std::map<std::string, std::string>& external_ips) {
  std::vector<api::ProberPeer> out;
  for (const api::ProberEndpoint& e : endpoints) {
    const auto ip = external_ips.find(e.node);
    out.push_back({member + "/" + e.node, ip != external_ips.end() ? ip->second : e.host, e.port});
  }
  return out;
}

DesiredProberPeers prober_peers_for(
    const std::string& member, const std::map<std::string, std::vector<api::ProberPeer>>& probers) {
  std::vector<api::ProberPeer> all;
  for (const auto& [other, peers] : probers)
    if (other != member) all.insert(all.end(), peers.begin(), peers.end());
  std::sort(all.begin(), all.end(),
            [](const api::ProberPeer& a, const api::ProberPeer& b) { return a.name < b.name; });
  DesiredProberPeers desired;
  desired.peers.cluster = member;
  // The document's size as format_prober_peers writes it, peer by peer.
  std::size_t bytes = api::format_prober_peers({member, {}}).size();
  for (api::ProberPeer& peer : all) {
    const std::size_t more =
        json{{"name", peer.name}, {"host", peer.host}, {"port", peer.port}}.dump().size() + 1;
    if (desired.peers.peers.size() >= api::kMaxProberPeers ||
        bytes + more > api::kMaxProberPeersBytes) {
      ++desired.left_out;
      continue;
    }
    bytes += more;
    desired.peers.peers.push_back(std::move(peer));
  }
  return desired;
}

json prober_peers_configmap(const std::string& ns, const std::string& hub_id,
                            const api::ProberPeers& peers) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata",
           {{"name", api::kProberPeersConfigMap},
            {"namespace", ns},
            {"labels", {{kManagedByLabel, kManagedByOperator}, {kHubLabel, hub_id}}}}},
          {"data", {{api::kProberPeersKey, api::format_prober_peers(peers)}}}};
}

}  // namespace tessel::controller
