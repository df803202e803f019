#include "noderuntime/prober/peer_directory.h"

#include <algorithm>

namespace tessel::prober {

std::vector<ProbePeer> probe_peers(const std::vector<api::ProberEndpoint>& in_cluster,
                                   const std::string& self_node,
                                   const std::optional<api::ProberPeers>& cross) {
  std::vector<ProbePeer> peers;
  for (const api::ProberEndpoint& endpoint : in_cluster) {
    if (endpoint.node != self_node) peers.push_back({endpoint.node, endpoint.host, endpoint.port});
  }
  if (cross) {
    for (const api::ProberPeer& peer : cross->peers)
      peers.push_back({peer.name, peer.host, peer.port});
  }
  // Stable: of two peers with one name, the first (in-cluster) stays.
  std::stable_sort(peers.begin(), peers.end(),
                   [](const ProbePeer& a, const ProbePeer& b) { return a.name < b.name; });
  peers.erase(std::unique(peers.begin(), peers.end(),
                          [](const ProbePeer& a, const ProbePeer& b) { return a.name == b.name; }),
              peers.end());
  return peers;
}

}  // namespace tessel::prober
