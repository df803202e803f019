// job.json's links for the stage pods (issue 20, operator/controller/stage_links.h): shape false,
// and for every pair of ranks on different nodes that share a stage or a replica, the link the
// placement's topology holds from the prober's measurements; ranks of one node and estimated
// links are not listed; past kMaxStageLinkPairs the largest bandwidth-delay products are kept.
// The reconciler writes them into every member's job.json.
#include "operator/controller/stage_links.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>

#include "api/link_annotations.h"
#include "kube/object.h"
#include "tests/operator/placement_inputs.h"
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller {
namespace {

using nlohmann::ordered_json;
using RankPair = std::pair<int, int>;

const std::string kNow = kube::format_rfc3339(std::chrono::system_clock::now());

// A measurement of a link of `rtt_ms` round trip and `bulk_gbps` (values exact at the
// annotation's 4 significant digits).
api::LinkMeasurement measurement(double rtt_ms, double bulk_gbps) {
  return {rtt_ms, rtt_ms + 1, bulk_gbps / 2, bulk_gbps, kNow};
}

// Every node of `nodes` whose index `measures` accepts lists each other such node, with
// measurement(i, j) (i the writer).
template <typename Measures, typename Measurement>
void annotate(std::vector<GpuNode>& nodes, Measures measures, Measurement m) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!measures(i)) continue;
    api::NodeLinks links;
    for (size_t j = 0; j < nodes.size(); ++j) {
      if (j != i && measures(j)) links.peers[nodes[j].cluster + "/" + nodes[j].name] = m(i, j);
    }
    nodes[i].annotations[api::kLinksAnnotation] = api::format_node_links(links);
  }
}

std::set<RankPair> listed_pairs(const ordered_json& links) {
  std::set<RankPair> out;
  for (const ordered_json& p : links.value("pairs", ordered_json::array()))
    out.insert({p["a"].get<int>(), p["b"].get<int>()});
  return out;
}

bool share_a_group(const TaskletPlace& x, const TaskletPlace& y) {
  return x.stage == y.stage || x.replica == y.replica;
}

TEST(StageLinks, ListTheMeasuredLinksOfRanksThatShareAStageOrAReplica) {
  std::vector<GpuNode> nodes = {gpu_node("a", "a1", 1, "us"), gpu_node("a", "a2", 1, "us"),
                                gpu_node("b", "b1", 1, "eu"), gpu_node("b", "b2", 1, "eu")};
  // Every pair its own link, and the two directions differ (the topology takes the worse).
  annotate(
      nodes, [](size_t) { return true; },
      [](size_t i, size_t j) {
        return measurement(20.0 * (std::min(i, j) + 1) + 2.0 * std::max(i, j) + (i < j),
                           0.5 * (i + j) + (i < j ? 1.0 : 2.0));
      });
  const JobPlacement placed = place_job(small_job(2, 2), nodes);
  ASSERT_EQ(placed.topology.measured_pairs, 6);
  const StageLinks links = stage_links(placed);
  EXPECT_EQ(links.links["shape"], false);
  // One rank per node: ranks 0 and 3 (stage 0 replica 0, stage 1 replica 1) and 1 and 2 share
  // neither a stage nor a replica.
  EXPECT_EQ(listed_pairs(links.links), (std::set<RankPair>{{0, 1}, {0, 2}, {1, 3}, {2, 3}}));
  EXPECT_EQ(links.listed, 4u);
  EXPECT_EQ(links.omitted, 0u);
  const placement::Topology& t = placed.topology.topology;
  for (const ordered_json& p : links.links["pairs"]) {
    const TaskletPlace& x = placed.tasklets.at(p["a"].get<size_t>());
    const TaskletPlace& y = placed.tasklets.at(p["b"].get<size_t>());
    const int dx = placed.placement.stages.at(x.stage).at(x.replica);
    const int dy = placed.placement.stages.at(y.stage).at(y.replica);
    EXPECT_EQ(p["gbps"].get<double>(), t.bandwidth_gbps(dx, dy)) << p.dump();
    EXPECT_EQ(p["latency_ms"].get<double>(), t.latency_ms(dx, dy)) << p.dump();
  }
}

TEST(StageLinks, RanksOfOneNodeAndEstimatedLinksAreNotListed) {
  std::vector<GpuNode> nodes = {gpu_node("a", "a1", 2, "us"), gpu_node("b", "b1", 1, "eu"),
                                gpu_node("b", "b2", 1, "eu")};
  // a1 and b1 measure each other; b2 has no prober and nobody lists it.
  annotate(
      nodes, [](size_t i) { return i < 2; }, [](size_t, size_t) { return measurement(150, 0.9); });
  const JobPlacement placed = place_job(small_job(2, 2), nodes);
  ASSERT_EQ(placed.topology.estimated_pairs, 2);
  std::set<RankPair> expected;
  for (const TaskletPlace& x : placed.tasklets) {
    for (const TaskletPlace& y : placed.tasklets) {
      if (x.rank < y.rank && share_a_group(x, y) && x.node != y.node && x.node != "b2" &&
          y.node != "b2")
        expected.insert({x.rank, y.rank});
    }
  }
  ASSERT_FALSE(expected.empty());
  const StageLinks links = stage_links(placed);
  EXPECT_EQ(listed_pairs(links.links), expected) << links.links.dump();
  for (const ordered_json& p : links.links["pairs"]) {
    EXPECT_EQ(p["gbps"], 0.9);
    EXPECT_EQ(p["latency_ms"], 75.0);
  }
}

TEST(StageLinks, WithoutMeasurementsNoPairs) {
  const std::vector<GpuNode> nodes = {gpu_node("a", "a1", 1, "us"), gpu_node("b", "b1", 1, "eu")};
  const StageLinks links = stage_links(place_job(small_job(1, 2), nodes));
  EXPECT_EQ(links.links, (ordered_json{{"shape", false}}));
  EXPECT_EQ(links.listed, 0u);
  EXPECT_EQ(links.omitted, 0u);
}

// 3 stages x 64 replicas, each rank on a node of its own: 3 x 64 x 63 / 2 + 64 x 3 = 6240 pairs
// share a stage or a replica, more than kMaxStageLinkPairs.
TEST(StageLinks, PastTheLimitTheLargestBandwidthDelayProductsAreKept) {
  constexpr int kStages = 3, kReplicas = 64, kRanks = kStages * kReplicas;
  std::vector<GpuNode> nodes;
  for (int i = 0; i < kRanks; ++i) nodes.push_back(gpu_node("a", "n" + std::to_string(i), 1, "us"));
  const auto rtt_ms = [](size_t i, size_t j) {
    return 1.0 + static_cast<double>((std::min(i, j) * 31 + std::max(i, j) * 17) % 97);
  };
  annotate(
      nodes, [](size_t) { return true; },
      [&](size_t i, size_t j) { return measurement(rtt_ms(i, j), 1.0 + (i + j) % 3); });
  JobPlacement placed;
  placed.topology = build_cluster_topology(nodes);
  for (int rank = 0; rank < kRanks; ++rank) {
    placed.tasklets.push_back(
        {rank, rank % kStages, rank / kStages, "a", "n" + std::to_string(rank)});
  }
  const StageLinks links = stage_links(placed);
  EXPECT_EQ(links.listed, kMaxStageLinkPairs);
  EXPECT_EQ(links.omitted, 6240 - kMaxStageLinkPairs);
  const std::set<RankPair> listed = listed_pairs(links.links);
  ASSERT_EQ(listed.size(), kMaxStageLinkPairs);
  const auto bdp = [&](int a, int b) {  // the topology's link: the worse direction
    const placement::Topology& t = placed.topology.topology;
    return t.bandwidth_gbps(a, b) * t.latency_ms(a, b);  // device = rank here
  };
  double smallest_listed = 1e300, largest_left_out = 0;
  for (const TaskletPlace& x : placed.tasklets) {
    for (const TaskletPlace& y : placed.tasklets) {
      if (x.rank >= y.rank) continue;
      if (listed.contains({x.rank, y.rank})) {
        EXPECT_TRUE(share_a_group(x, y)) << x.rank << " " << y.rank;
        smallest_listed = std::min(smallest_listed, bdp(x.rank, y.rank));
      } else if (share_a_group(x, y)) {
        largest_left_out = std::max(largest_left_out, bdp(x.rank, y.rank));
      }
    }
  }
  EXPECT_GE(smallest_listed, largest_left_out);
  EXPECT_GT(largest_left_out, 0);
}

}  // namespace

namespace reconciler_test {
namespace {

json links_of_job_json(const json& config_map) {
  return json::parse(config_map["data"]["job.json"].get<std::string>()).value("links", json());
}

// A job of 1 stage x 2 replicas across the two members: the data-parallel pair crosses a long,
// fat link that both nodes measured, each one way (the topology takes the worse of the two).
TEST_F(TrainingJobReconcilerTest, TheStagesJobJsonCarriesTheMeasuredLinks) {
  const std::string a1 = add_node(0, "a1", 1);
  const std::string b1 = add_node(1, "b1", 1);
  const api::LinkMeasurement from_a = measurement(150, 0.9), from_b = measurement(148, 1.2);
  for (const auto& [member, node, peer, m] :
       {std::tuple{0, a1, "member-b/" + b1, from_a}, std::tuple{1, b1, "member-a/" + a1, from_b}}) {
    api::NodeLinks links;
    links.peers[peer] = m;
    members_[member]->admin().patch(
        core("nodes"), "", node, kube::PatchType::kMerge,
        {{"metadata",
          {{"annotations", {{api::kLinksAnnotation, api::format_node_links(links)}}}}}});
  }
  create_and_place(job_manifest("wan", 1, 2));
  const json current = job("wan");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  // The link the placement rested on (status.placement.links), and the worse direction of what
  // the nodes measured.
  const json placed = current["status"]["placement"]["links"];
  ASSERT_EQ(placed.size(), 1u) << placed.dump();
  const double gbps = std::min(from_a.link().bandwidth_gbps, from_b.link().bandwidth_gbps);
  const double latency_ms = std::max(from_a.link().latency_ms, from_b.link().latency_ms);
  EXPECT_EQ(placed[0]["gbps"].get<double>(), gbps);
  EXPECT_EQ(placed[0]["rttMs"].get<double>(), 2 * latency_ms);
  for (int m = 0; m < 2; ++m) {
    const std::vector<json> maps = remote(m, "configmaps", current);
    ASSERT_EQ(maps.size(), 1u) << kMembers[m];
    EXPECT_EQ(links_of_job_json(maps[0]),
              (json{{"shape", false},
                    {"pairs", {{{"a", 0}, {"b", 1}, {"gbps", gbps}, {"latency_ms", latency_ms}}}}}))
        << kMembers[m];
  }
}

TEST_F(TrainingJobReconcilerTest, WithoutMeasurementsTheStagesJobJsonListsNoLinks) {
  add_node(0, "a1", 1);
  add_node(1, "b1", 1);
  create_and_place(job_manifest("estimated", 1, 2));
  const json current = job("estimated");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  for (int m = 0; m < 2; ++m) {
    const std::vector<json> maps = remote(m, "configmaps", current);
    ASSERT_EQ(maps.size(), 1u) << kMembers[m];
    EXPECT_EQ(links_of_job_json(maps[0]), (json{{"shape", false}})) << kMembers[m];
  }
}

}  // namespace
}  // namespace reconciler_test
}  // namespace tessel::controller
