// What a MemberCluster's status counts: Ready, schedulable GPU nodes, their GPUs total and free,
// and the probe coverage over every directed pair of GPU nodes of the federation.
#include "operator/controller/member_status.h"

#include <gtest/gtest.h>

#include "api/link_annotations.h"

namespace tessel::controller {
namespace {

using nlohmann::json;

json node(const std::string& name, int gpus, bool ready = true, bool cordoned = false,
          const std::string& links = "") {
  json n = {{"metadata", {{"name", name}}},
            {"spec", {{"unschedulable", cordoned}}},
            {"status",
             {{"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}},
              {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
  if (!links.empty()) n["metadata"]["annotations"] = {{api::kLinksAnnotation, links}};
  return n;
}

json pod(const std::string& node_name, int gpus, const std::string& phase = "Running") {
  return {{"metadata", {{"name", "p"}}},
          {"spec",
           {{"nodeName", node_name},
            {"containers",
             {{{"name", "c"}, {"resources", {{"requests", {{"nvidia.com/gpu", gpus}}}}}}}}}},
          {"status", {{"phase", phase}}}};
}

std::string links(const std::vector<std::string>& peers) {
  api::NodeLinks l;
  for (const std::string& peer : peers)
    l.peers[peer] = {0.2, 0.3, 9.0, 9.5, "2026-11-26T00:00:00Z"};
  return api::format_node_links(l);
}

TEST(MemberStatus, CountsUsableGpuNodesAndTheirFreeGpus) {
  const std::vector<json> nodes = {node("gpu-1", 8), node("gpu-2", 4), node("down", 8, false),
                                   node("cordoned", 8, true, true), node("cpu", 0)};
  const std::vector<json> pods = {pod("gpu-1", 3), pod("gpu-2", 4), pod("gpu-1", 5, "Succeeded"),
                                  pod("down", 2)};
  const MemberCounts counts = count_member("a", nodes, pods, {});
  EXPECT_EQ(counts.nodes, 2);
  EXPECT_EQ(counts.gpus_total, 12);
  EXPECT_EQ(counts.gpus_free, 5);
  EXPECT_EQ(usable_gpu_nodes(nodes), (std::vector<std::string>{"gpu-1", "gpu-2"}));
}

TEST(MemberStatus, ProbeCoverageCountsMeasuredPairsToEveryOtherGpuNode) {
  // Two GPU nodes here, two in member b: each node here has 1 + 2 peers to measure.
  const std::vector<json> nodes = {
      node("gpu-1", 8, true, false, links({"gpu-2", "b/gpu-3", "b/gone", "c/elsewhere"})),
      node("gpu-2", 8, true, false, links({"a/gpu-1"})),  // its own cluster, spelled in full
      node("gpu-3", 8, true, false, "{not json"),         // measures nothing, counts no pair
  };
  const std::vector<json> usable = {nodes[0], nodes[1]};
  const MemberCounts counts = count_member("a", usable, {}, {{"b", {"gpu-3", "gpu-4"}}});
  EXPECT_EQ(counts.pairs, 6);
  EXPECT_EQ(counts.measured_pairs, 3);
  EXPECT_EQ(counts.probe_coverage(), "3/6");
  // A node with a bad annotation measures nothing.
  EXPECT_EQ(count_member("a", {nodes[2]}, {}, {{"b", {"gpu-3"}}}).probe_coverage(), "0/1");
  EXPECT_EQ(count_member("a", {}, {}, {}).probe_coverage(), "0/0");
}

TEST(MemberStatus, SiteAggregatesCoverTheSitesPeersNotListedByName) {
  // Three GPU nodes here, three in member b, two in member c. gpu-1 names gpu-2 and b/gpu-4 and
  // aggregates the rest of its own cluster ("*": gpu-3) and of b ("b/*": gpu-5, gpu-6); c is
  // not measured. gpu-2 only aggregates c.
  const std::vector<json> nodes = {
      node("gpu-1", 8, true, false, links({"gpu-2", "b/gpu-4", "*", "b/*"})),
      node("gpu-2", 8, true, false, links({"c/*"})),
      node("gpu-3", 8),
  };
  const MemberCounts counts =
      count_member("a", nodes, {}, {{"b", {"gpu-4", "gpu-5", "gpu-6"}}, {"c", {"gpu-7", "gpu-8"}}});
  EXPECT_EQ(counts.pairs, 3 * (2 + 5));
  EXPECT_EQ(counts.measured_pairs, (2 + 3) + 2);
}

}  // namespace
}  // namespace tessel::controller
