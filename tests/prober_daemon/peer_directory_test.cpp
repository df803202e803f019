// The peer directory: who a prober measures, from its cluster's prober endpoints and the
// operator's cross-cluster list.
#include "noderuntime/prober/peer_directory.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "api/prober_peers.h"

namespace tessel::prober {
namespace {

std::vector<std::string> describe(const std::vector<ProbePeer>& peers) {
  std::vector<std::string> out;
  for (const ProbePeer& p : peers)
    out.push_back(p.name + "@" + p.host + ":" + std::to_string(p.port));
  return out;
}

TEST(PeerDirectory, InClusterPeersButSelfThenCrossPeersSortedByName) {
  const std::vector<api::ProberEndpoint> in_cluster = {
      {"gpu-3", "10.0.0.3", 7471}, {"gpu-1", "10.0.0.1", 7471}, {"gpu-2", "10.0.0.2", 7500}};
  api::ProberPeers cross;
  cross.cluster = "member-a";
  cross.peers = {{"member-b/gpu-1", "192.0.2.1", 7471}, {"member-c/gpu-9", "192.0.2.9", 7472}};
  EXPECT_EQ(
      describe(probe_peers(in_cluster, "gpu-2", cross)),
      (std::vector<std::string>{"gpu-1@10.0.0.1:7471", "gpu-3@10.0.0.3:7471",
                                "member-b/gpu-1@192.0.2.1:7471", "member-c/gpu-9@192.0.2.9:7472"}));
  // Without a ConfigMap: the cluster's own only; alone in the cluster: nobody.
  EXPECT_EQ(describe(probe_peers(in_cluster, "gpu-1", std::nullopt)),
            (std::vector<std::string>{"gpu-2@10.0.0.2:7500", "gpu-3@10.0.0.3:7471"}));
  EXPECT_TRUE(probe_peers({{"gpu-1", "10.0.0.1", 7471}}, "gpu-1", std::nullopt).empty());
  // A node that is not among the probers (its own pod not Running yet) probes them all.
  EXPECT_EQ(probe_peers(in_cluster, "gpu-9", std::nullopt).size(), 3u);
}

TEST(PeerDirectory, ANameGivenTwiceIsKeptOnceTheInClusterOne) {
  api::ProberPeers cross;
  cross.cluster = "member-a";
  cross.peers = {{"member-b/gpu-1", "192.0.2.1", 7471}};
  // Endpoints from elsewhere than prober_endpoints may repeat a node.
  const std::vector<api::ProberEndpoint> in_cluster = {{"gpu-1", "10.0.0.1", 7471},
                                                       {"gpu-1", "10.0.0.99", 7471}};
  EXPECT_EQ(describe(probe_peers(in_cluster, "gpu-2", cross)),
            (std::vector<std::string>{"gpu-1@10.0.0.1:7471", "member-b/gpu-1@192.0.2.1:7471"}));
}

}  // namespace
}  // namespace tessel::prober
