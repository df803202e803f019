// The cross-cluster peers of the probers of one member cluster: a ConfigMap the operator keeps in
// the prober namespace of every member, which that member's probers read. One format, defined
// here only, with no Kubernetes calls (the operator writes it, the prober reads it):
//
//   ConfigMap tessel-prober-peers, data["peers.json"]:
//   {"version":1,"cluster":"member-a",
//    "peers":[{"name":"member-b/gpu-1","host":"10.0.0.5","port":7471}]}
//
// `cluster` is the member the ConfigMap is in; `peers` the probers of every other member, named
// "<cluster>/<node>" as in the links annotation (api/link_annotations.h), sorted by name. The
// probers of the same cluster are not listed: each prober finds them through its API server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::api {

inline constexpr const char* kProberPeersConfigMap = "tessel-prober-peers";
inline constexpr const char* kProberPeersKey = "peers.json";
inline constexpr const char* kProberSelector = "app.kubernetes.io/name=tessel-prober";
inline constexpr const char* kProbePortName = "probe";
inline constexpr uint16_t kDefaultProbePort = 7471;
// As many peers as the links annotation may list (placement::kMaxDevices).
inline constexpr size_t kMaxProberPeers = 5000;
// A ConfigMap holds at most 1 MiB; the document leaves room for the object around it.
inline constexpr size_t kMaxProberPeersBytes = 900 * 1024;

struct ProberPeer {
  std::string name;  // "<cluster>/<node>"
  std::string host;  // an IP address or a DNS name
  uint16_t port = 0;
  bool operator==(const ProberPeer&) const = default;
};

struct ProberPeers {
  std::string cluster;            // the member this list is for
  std::vector<ProberPeer> peers;  // the probers of the other members
  bool operator==(const ProberPeers&) const = default;
};

// Parses data["peers.json"]. Throws ManifestError(source, {"data[peers.json]...", why}) naming
// every bad field (at most 20): size over kMaxProberPeersBytes, not JSON, version other than 1,
// cluster not a MemberCluster name, more than kMaxProberPeers peers, a name not
// "<cluster>/<node>" or naming `cluster` itself, a host that is neither an IP address nor a DNS
// name, a port outside 1..65535, a name listed twice, unknown fields. Peers come back sorted by
// name. `source` names the ConfigMap ("member-a: ConfigMap tessel-system/tessel-prober-peers").
ProberPeers parse_prober_peers(const std::string& text, const std::string& source);
// Compact JSON, peers sorted by name: parse_prober_peers(format_prober_peers(x)) == x for a
// valid x with sorted peers.
std::string format_prober_peers(const ProberPeers& peers);

// One prober pod's endpoint: the node it runs on, its podIP and its probe port.
struct ProberEndpoint {
  std::string node, host;
  uint16_t port = 0;
  bool operator==(const ProberEndpoint&) const = default;
};

// The probers among `pods` (the caller has applied the label selector and namespace): a pod
// counts when it is Running, not being deleted, bound (spec.nodeName), has a status.podIP and a
// container port named "probe" (its hostPort when set, else its containerPort, in 1..65535).
// One per node (the newest pod when a rollout briefly runs two), sorted by node.
std::vector<ProberEndpoint> prober_endpoints(const std::vector<nlohmann::json>& pods);

}  // namespace tessel::api
