// The prober's Node annotation: a round trip, and every kind of bad value refused with the
// node, the annotation and the peer named.
#include "api/link_annotations.h"

#include <gtest/gtest.h>

#include <string>

#include "api/manifest_error.h"

namespace tessel::api {
namespace {

std::string error_of(const std::string& value) {
  try {
    parse_node_links(value, "gpu-node-1");
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string one_peer(const std::string& peer, const std::string& entry) {
  return R"({"version": 1, "peers": {")" + peer + "\": " + entry + "}}";
}

TEST(LinkAnnotations, RoundTripsAndGivesTheLinkTheCostModelReads) {
  NodeLinks links;
  links.peers["gpu-node-2"] = {0.2, 0.35, 0.9, 9.4, "2026-11-26T00:12:03Z"};
  links.peers["member-b/gpu-node-7"] = {48, 51.5, 0.05, 0.8, "2026-11-26T00:13:40Z"};
  const std::string value = format_node_links(links);
  EXPECT_EQ(parse_node_links(value, "gpu-node-1"), links);
  const placement::Link far = links.peers["member-b/gpu-node-7"].link();
  EXPECT_DOUBLE_EQ(far.latency_ms, 24);
  EXPECT_DOUBLE_EQ(far.bandwidth_gbps, 0.8);
}

TEST(LinkAnnotations, BadValuesAreRefusedNamingTheNodeAndPeer) {
  const std::string field = "gpu-node-1: metadata.annotations[net.tessel.dev/links]";
  EXPECT_EQ(error_of("not json"), field + ": is not a JSON object");
  EXPECT_EQ(error_of(R"({"version": 2, "peers": {}})"), field + ".version: must be 1, got 2");
  EXPECT_EQ(error_of(R"({"version": 1, "peers": []})"),
            field + ".peers: must be an object, got []");
  EXPECT_EQ(error_of(one_peer(
                "Node_2", R"({"rttMs": [1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[Node_2]: not a node name or <cluster>/<node>");
  EXPECT_EQ(error_of(one_peer(
                "a/b/c", R"({"rttMs": [1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[a/b/c]: not a node name or <cluster>/<node>");
  EXPECT_EQ(
      error_of(one_peer("n2", R"({"rttMs": [1], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
      field + ".peers[n2].rttMs: must be a list of two numbers, got [1]");
  EXPECT_EQ(error_of(one_peer(
                "n2", R"({"rttMs": [-1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[n2].rttMs[0]: must be in [0, 120000] ms, got -1");
  EXPECT_EQ(error_of(one_peer(
                "n2", R"({"rttMs": [5, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[n2].rttMs[1]: must be in [5, 120000] ms (and >= the median), got 2");
  EXPECT_EQ(error_of(one_peer(
                "n2", R"({"rttMs": [1, 2], "gbps": [1, 1e-300], "at": "2026-11-26T00:00:00Z"})")),
            field + ".peers[n2].gbps[1]: must be in [1e-06, 100000] Gbit/s, got 1e-300");
  EXPECT_EQ(
      error_of(one_peer(
          "n2", R"({"rttMs": [1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z", "loss": 0})")),
      field + ".peers[n2].loss: unknown field");
  EXPECT_NE(error_of(std::string(300 * 1024, ' ')).find("more than the limit of 229376"),
            std::string::npos);
  // Every error at once.
  const std::string two = error_of(
      R"({"version": 1, "peers": {"n2": {"rttMs": [-1, 2], "gbps": [1, 2], "at": "2026-11-26T00:00:00Z"},
                                  "n3": {"rttMs": [1, 2], "gbps": [0, 2], "at": "2026-11-26T00:00:00Z"}}})");
  EXPECT_NE(two.find("2 errors"), std::string::npos) << two;
  EXPECT_NE(two.find("peers[n2].rttMs[0]"), std::string::npos) << two;
  EXPECT_NE(two.find("peers[n3].gbps[0]"), std::string::npos) << two;
}

}  // namespace
}  // namespace tessel::api
