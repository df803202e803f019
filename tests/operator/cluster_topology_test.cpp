// The topology of candidate GPUs across clusters: measured links from the prober's annotations
// (both directions, peers in other clusters, site aggregates), estimates where nothing was
// measured, and notes for what could not be taken as measured.
#include "operator/controller/cluster_topology.h"

#include <gtest/gtest.h>

#include <array>

#include "api/link_annotations.h"
#include "kube/object.h"
#include "tests/operator/placement_inputs.h"

namespace tessel::controller {
namespace {

// How many node pairs rest on a measurement, on a site aggregate (of those), on an estimate.
std::array<int, 3> pair_counts(const ClusterTopology& c) {
  return {c.measured_pairs, c.aggregated_pairs, c.estimated_pairs};
}

void measure(GpuNode& node, const std::string& peer, double rtt_ms, double gbps) {
  api::NodeLinks links;
  if (node.annotations.count(api::kLinksAnnotation))
    links = api::parse_node_links(node.annotations[api::kLinksAnnotation], node.name);
  links.peers[peer] = {rtt_ms, rtt_ms * 1.2, gbps / 10, gbps,
                       kube::format_rfc3339(std::chrono::system_clock::now())};
  node.annotations[api::kLinksAnnotation] = api::format_node_links(links);
}

TEST(ClusterTopology, MeasuredLinksWinAndTheSlowerDirectionCounts) {
  std::vector<GpuNode> nodes = {gpu_node("a", "n1", 2, "us-west-2", "us-west-2a"),
                                gpu_node("a", "n2", 2, "us-west-2", "us-west-2a"),
                                gpu_node("b", "m1", 1, "eu-north-1", "eu-north-1a")};
  measure(nodes[0], "n2", 0.4, 20);     // a/n1 -> a/n2
  measure(nodes[1], "n1", 0.6, 12);     // a/n2 -> a/n1: slower
  measure(nodes[0], "b/m1", 160, 0.5);  // a/n1 -> b/m1, only this direction
  const ClusterTopology c = build_cluster_topology(nodes);
  const placement::Topology& t = c.topology;
  ASSERT_EQ(t.size(), 5);
  ASSERT_EQ(c.places.size(), 5u);
  EXPECT_EQ(c.places[2].node, "n2");
  EXPECT_EQ(c.places[3].gpu, 1);
  EXPECT_EQ(c.places[4].cluster, "b");
  // Two GPUs of one node: the node's fast link.
  EXPECT_DOUBLE_EQ(t.bandwidth_gbps(0, 1), LinkEstimates{}.same_node.bandwidth_gbps);
  // a/n1 - a/n2: the slower direction, one-way latency (half the round trip).
  EXPECT_DOUBLE_EQ(t.bandwidth_gbps(0, 2), 12);
  EXPECT_DOUBLE_EQ(t.latency_ms(3, 1), 0.3);
  // a/n1 - b/m1 measured one way.
  EXPECT_DOUBLE_EQ(t.bandwidth_gbps(4, 0), 0.5);
  EXPECT_DOUBLE_EQ(t.latency_ms(0, 4), 80);
  // a/n2 - b/m1 nobody measured: across regions.
  EXPECT_DOUBLE_EQ(t.bandwidth_gbps(2, 4), LinkEstimates{}.other_region.bandwidth_gbps);
  EXPECT_EQ(c.measured_pairs, 2);
  EXPECT_EQ(c.estimated_pairs, 1);
  EXPECT_TRUE(c.notes.empty());
  EXPECT_EQ(t.gpu_types.size(), 1u);
  EXPECT_EQ(t.devices[0].gpu, "H100-SXM");
}

TEST(ClusterTopology, EstimatesFollowZonesAndRegions) {
  const std::vector<GpuNode> nodes = {
      gpu_node("a", "z1", 1, "r1", "r1a"), gpu_node("a", "z1b", 1, "r1", "r1a"),
      gpu_node("a", "z2", 1, "r1", "r1b"), gpu_node("b", "far", 1, "r2", "r2a"),
      gpu_node("b", "nowhere", 1, "", "")};
  const LinkEstimates e;
  const ClusterTopology c = build_cluster_topology(nodes, e);
  EXPECT_DOUBLE_EQ(c.topology.latency_ms(0, 1), e.same_zone.latency_ms);
  EXPECT_DOUBLE_EQ(c.topology.latency_ms(0, 2), e.same_region.latency_ms);
  EXPECT_DOUBLE_EQ(c.topology.latency_ms(0, 3), e.other_region.latency_ms);
  EXPECT_DOUBLE_EQ(c.topology.latency_ms(4, 0), e.other_region.latency_ms);
  EXPECT_EQ(c.estimated_pairs, 10);
  EXPECT_EQ(c.measured_pairs, 0);
}

TEST(ClusterTopology, BadAnnotationsAndUnknownGpusBecomeNotes) {
  std::vector<GpuNode> nodes = {gpu_node("a", "n1", 1, "r", "z", "NVIDIA-GeForce-RTX-4090"),
                                gpu_node("a", "n2", 1, "r", "z", "")};
  nodes[1].annotations[api::kLinksAnnotation] =
      R"({"version": 1, "peers": {"n1": {"rttMs": [-3, 1], "gbps": [1, 2],
                                          "at": "2026-11-26T00:00:00Z"}}})";
  const ClusterTopology c = build_cluster_topology(nodes);
  ASSERT_EQ(c.notes.size(), 3u);
  EXPECT_NE(c.notes[0].find("a/n2: metadata.annotations[net.tessel.dev/links].peers[n1].rttMs[0]"),
            std::string::npos)
      << c.notes[0];
  EXPECT_NE(c.notes[0].find("(its links are estimated)"), std::string::npos);
  EXPECT_EQ(c.notes[1],
            "a/n1: unknown GPU product 'NVIDIA-GeForce-RTX-4090' (taken as V100-SXM2-16GB)");
  EXPECT_EQ(c.notes[2], "a/n2: no nvidia.com/gpu.product label (taken as V100-SXM2-16GB)");
  EXPECT_EQ(c.estimated_pairs, 1);
}

TEST(ClusterTopology, AggregatesStandForTheNodesNotListedAndANamedMeasurementWins) {
  std::vector<GpuNode> nodes = {
      gpu_node("a", "n1", 1, "r1", "r1a"), gpu_node("a", "n2", 1, "r1", "r1a"),
      gpu_node("a", "n3", 1, "r1", "r1a"), gpu_node("b", "m1", 1, "r2", "r2a"),
      gpu_node("b", "m2", 1, "r2", "r2a"), gpu_node("c", "k1", 1, "r3", "r3a")};
  measure(nodes[0], "n2", 0.2, 30);   // a/n1 -> a/n2 by name...
  measure(nodes[0], "*", 0.8, 8);     // ...and the rest of cluster a (n3)
  measure(nodes[0], "b/m1", 40, 2);   // a/n1 -> b/m1 by name...
  measure(nodes[0], "b/*", 60, 0.9);  // ...and the rest of b (m2)
  const ClusterTopology c = build_cluster_topology(nodes);
  const placement::Topology& t = c.topology;
  EXPECT_DOUBLE_EQ(t.bandwidth_gbps(0, 1), 30);  // named, not the aggregate's 8
  EXPECT_DOUBLE_EQ(t.bandwidth_gbps(0, 2), 8);   // "*"
  EXPECT_DOUBLE_EQ(t.latency_ms(0, 2), 0.4);
  EXPECT_DOUBLE_EQ(t.bandwidth_gbps(0, 3), 2);    // named
  EXPECT_DOUBLE_EQ(t.bandwidth_gbps(0, 4), 0.9);  // "b/*"
  EXPECT_DOUBLE_EQ(t.latency_ms(4, 0), 30);
  // a/n1 published no aggregate for c: a/n1 - c/k1 is estimated; so are the pairs a/n1 is not in.
  EXPECT_DOUBLE_EQ(t.bandwidth_gbps(0, 5), LinkEstimates{}.other_region.bandwidth_gbps);
  EXPECT_EQ(pair_counts(c), (std::array{4, 2, 11}));
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0],
            "2 node pairs rest on site aggregates, not on a measurement of the pair: a node's "
            "median link to the nodes of a cluster it did not list by name (written by a/n1)");
}

TEST(ClusterTopology, APairTakesTheSlowerDirectionWhetherNamedOrAggregate) {
  std::vector<GpuNode> nodes = {gpu_node("a", "n1", 1, "r1", "r1a"),
                                gpu_node("b", "m1", 1, "r2", "r2a"),
                                gpu_node("b", "m2", 1, "r2", "r2a")};
  measure(nodes[0], "b/*", 50, 4);   // a/n1 -> b: fast
  measure(nodes[1], "a/n1", 70, 1);  // b/m1 -> a/n1 by name: slower, and it wins
  measure(nodes[2], "a/*", 40, 6);   // b/m2 -> a: faster than a/n1 -> b
  const ClusterTopology c = build_cluster_topology(nodes);
  // a/n1 - b/m1: the slower of 4 (aggregate) and 1 (named), the larger latency.
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(0, 1), 1);
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(1, 0), 1);
  EXPECT_DOUBLE_EQ(c.topology.latency_ms(0, 1), 35);
  // a/n1 - b/m2: both directions aggregates, the slower of 4 and 6.
  EXPECT_DOUBLE_EQ(c.topology.bandwidth_gbps(0, 2), 4);
  EXPECT_DOUBLE_EQ(c.topology.latency_ms(2, 0), 25);
  EXPECT_EQ(pair_counts(c), (std::array{2, 2, 1}));  // estimated: b/m1 - b/m2
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("(written by a/n1, b/m2)"), std::string::npos) << c.notes[0];
}

TEST(ClusterTopology, TheAggregatesNoteNamesAFewWritersAndCountsTheRest) {
  std::vector<GpuNode> nodes;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(gpu_node("a", "n" + std::to_string(i), 1, "r1", "r1a"));
    measure(nodes.back(), "*", 0.5, 10);
  }
  const ClusterTopology c = build_cluster_topology(nodes);
  EXPECT_EQ(pair_counts(c), (std::array{15, 15, 0}));
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0],
            "15 node pairs rest on site aggregates, not on a measurement of the pair: a node's "
            "median link to the nodes of a cluster it did not list by name (written by a/n0, "
            "a/n1, a/n2 and 3 more nodes)");
}

}  // namespace
}  // namespace tessel::controller
