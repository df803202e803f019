// status.placement.links: the node pairs a placement's pipelines and data-parallel rings cross,
// with the link the cost model used and where it came from.
#include "operator/controller/placement_links.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "api/link_annotations.h"
#include "kube/object.h"
#include "tests/operator/placement_inputs.h"

namespace tessel::controller {
namespace {

using nlohmann::json;

// A node of H100s: cluster a's in region us, the others' in eu.
GpuNode gpu_node(const std::string& cluster, const std::string& name, int gpus) {
  return controller::gpu_node(cluster, name, gpus, cluster == "a" ? "us" : "eu");
}

// The small job, searched with 200 evaluations.
api::TrainingJob job(int stages, int replicas) { return small_job(stages, replicas, 4, 200); }

// Every node of `nodes` measured its links to the others: `rtt_ms`/`gbps` inside a cluster,
// `cross_rtt_ms`/`cross_gbps` across; the nodes of `unmeasured` wrote nothing.
void annotate(std::vector<GpuNode>& nodes, const std::set<std::string>& unmeasured) {
  const std::string at = kube::format_rfc3339(std::chrono::system_clock::now());
  for (GpuNode& n : nodes) {
    if (unmeasured.count(n.name)) continue;
    api::NodeLinks links;
    for (const GpuNode& peer : nodes) {
      if (peer.name == n.name || unmeasured.count(peer.name)) continue;
      const bool same = peer.cluster == n.cluster;
      links.peers[same ? peer.name : peer.cluster + "/" + peer.name] = {
          same ? 0.4 : 60.0, same ? 0.5 : 70.0, same ? 8.0 : 0.1, same ? 40.0 : 0.5, at};
    }
    n.annotations[api::kLinksAnnotation] = api::format_node_links(links);
  }
}

TEST(PlacementLinks, EveryCrossedNodePairIsListedSlowestFirstWithItsMeasuredFigures) {
  std::vector<GpuNode> nodes = {gpu_node("a", "a1", 1), gpu_node("a", "a2", 1),
                                gpu_node("b", "b1", 1), gpu_node("b", "b2", 1)};
  annotate(nodes, {});
  const api::TrainingJob j = job(2, 2);
  const JobPlacement placed = place_job(j, nodes);
  const auto [links, omitted] = placement_links(placed, 2, 2);
  EXPECT_EQ(omitted, 0u);

  // The pairs the placement's pipelines and rings cross, computed here from its tasklets.
  std::map<std::pair<std::string, std::string>, std::set<std::string>> expected;
  const auto site = [&](int stage, int replica) {
    for (const TaskletPlace& t : placed.tasklets)
      if (t.stage == stage && t.replica == replica) return t.cluster + "/" + t.node;
    return std::string();
  };
  const auto expect_pair = [&](std::string x, std::string y, const std::string& use) {
    if (x == y) return;
    if (y < x) std::swap(x, y);
    expected[{x, y}].insert(use);
  };
  for (int r = 0; r < 2; ++r) expect_pair(site(0, r), site(1, r), "pipeline");
  for (int s = 0; s < 2; ++s) expect_pair(site(s, 0), site(s, 1), "data-parallel");

  ASSERT_EQ(links.size(), expected.size()) << links.dump(1);
  double previous_gbps = 0;
  for (const json& link : links) {
    const std::string from = link["from"], to = link["to"];
    EXPECT_LT(from, to);
    const auto it = expected.find({from, to});
    ASSERT_NE(it, expected.end()) << from << " - " << to << " is not crossed";
    const std::string carries = link["carries"];
    EXPECT_EQ(carries, it->second.size() == 2 ? "pipeline,data-parallel" : *it->second.begin());
    EXPECT_EQ(link["source"], "measured");
    const bool across = from.substr(0, 2) != to.substr(0, 2);
    // The cost model's link: the median round trip, and the bulk rate.
    EXPECT_DOUBLE_EQ(link["rttMs"].get<double>(), across ? 60.0 : 0.4);
    EXPECT_DOUBLE_EQ(link["gbps"].get<double>(), across ? 0.5 : 40.0);
    EXPECT_GE(link["gbps"].get<double>(), previous_gbps) << "not slowest first";
    previous_gbps = link["gbps"];
  }
  // status.placement carries the same list.
  EXPECT_EQ(placement_status(placed, j)["links"], links);
}

TEST(PlacementLinks, APairNoProberMeasuredSaysEstimated) {
  std::vector<GpuNode> nodes = {gpu_node("a", "a1", 1), gpu_node("b", "b1", 1)};
  annotate(nodes, {"a1", "b1"});
  const JobPlacement placed = place_job(job(2, 1), nodes);
  const auto [links, omitted] = placement_links(placed, 2, 1);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0]["source"], "estimated");
  EXPECT_EQ(links[0]["carries"], "pipeline");
  EXPECT_EQ(links[0]["from"], "a/a1");
  EXPECT_EQ(links[0]["to"], "b/b1");
}

TEST(PlacementLinks, GpusOfOneNodeCrossNoLink) {
  const std::vector<GpuNode> nodes = {gpu_node("a", "a1", 4)};
  const JobPlacement placed = place_job(job(2, 2), nodes);
  const auto [links, omitted] = placement_links(placed, 2, 2);
  EXPECT_TRUE(links.empty());
  EXPECT_EQ(omitted, 0u);
}

TEST(PlacementLinks, BeyondTheLimitTheSlowestAreListedAndTheRestCounted) {
  // 2 stages x 40 replicas on 80 single-GPU nodes: 40 pipeline pairs and 2 rings of 40.
  std::vector<GpuNode> nodes;
  for (int i = 0; i < 80; ++i)
    nodes.push_back(gpu_node(i < 40 ? "a" : "b", "n" + std::to_string(i), 1));
  const api::TrainingJob j = job(2, 40);
  const JobPlacement placed = place_job(j, nodes);
  const auto [links, omitted] = placement_links(placed, 2, 40);
  EXPECT_EQ(links.size(), kMaxStatusLinks);
  EXPECT_GT(omitted, 0u);
  const json status = placement_status(placed, j);
  EXPECT_EQ(status["linksOmitted"], omitted);
  // The unlisted ones are no slower than the fastest listed.
  EXPECT_LE(links.front()["gbps"].get<double>(), links.back()["gbps"].get<double>());
}

TEST(ClusterTopologySource, NamesEveryPairEitherWayAndRefusesAnUnknownOne) {
  std::vector<GpuNode> nodes = {gpu_node("a", "a1", 1), gpu_node("a", "a2", 1),
                                gpu_node("b", "b1", 1)};
  annotate(nodes, {"b1"});
  const ClusterTopology topology = build_cluster_topology(nodes);
  EXPECT_EQ(topology.source("a/a1", "a/a2"), LinkSource::kMeasured);
  EXPECT_EQ(topology.source("a/a2", "a/a1"), LinkSource::kMeasured);
  EXPECT_EQ(topology.source("a/a1", "b/b1"), LinkSource::kEstimated);
  EXPECT_THROW(topology.source("a/a1", "a/a1"), std::out_of_range);
  EXPECT_THROW(topology.source("a/a1", "c/c1"), std::out_of_range);
  EXPECT_STREQ(link_source_name(LinkSource::kAggregated), "aggregated");
}

}  // namespace
}  // namespace tessel::controller
