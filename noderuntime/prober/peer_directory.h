// Who this prober measures: the prober pods of its own cluster (found through the API server,
// named "<node>" as the links annotation names them) and the other clusters' probers the
// operator lists in the peers ConfigMap (named "<cluster>/<node>").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/prober_peers.h"
#include "noderuntime/prober/probe_client.h"

namespace tessel::prober {

// The peers to probe: every in-cluster endpoint but the one on `self_node`, then every cross
// peer, sorted by name; a name given twice is kept once (the in-cluster one). `cross` is
// nullopt while there is no peers ConfigMap.
std::vector<ProbePeer> probe_peers(const std::vector<api::ProberEndpoint>& in_cluster,
                                   const std::string& self_node,
                                   const std::optional<api::ProberPeers>& cross);

}  // namespace tessel::prober
