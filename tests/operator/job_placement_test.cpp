// The placement of one TrainingJob on the free GPUs of its member clusters: which GPUs are
// chosen (fewest clusters, then fewest nodes), that the search puts every tasklet on one of
// them exactly once, and that status.placement reads back into the same tasklets.
#include "operator/controller/job_placement.h"

#include <gtest/gtest.h>

#include <set>

#include "api/link_annotations.h"
#include "kube/object.h"
#include "tests/operator/placement_inputs.h"

namespace tessel::controller {
namespace {

using nlohmann::json;

int sum_free(const std::vector<GpuNode>& nodes) {
  int n = 0;
  for (const GpuNode& g : nodes) n += g.free_gpus;
  return n;
}

TEST(ChooseGpus, OneClusterWhenOneHoldsTheJob) {
  const std::vector<GpuNode> nodes = {gpu_node("a", "a1", 2, "us"), gpu_node("b", "b1", 4, "eu"),
                                      gpu_node("b", "b2", 1, "eu")};
  const std::vector<GpuNode> chosen = choose_gpus(nodes, 4);
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(chosen[0].cluster, "b");
  EXPECT_EQ(chosen[0].name, "b1");
  EXPECT_EQ(chosen[0].free_gpus, 4);
}

TEST(ChooseGpus, FullestNodesFirstAndTheLastOneCut) {
  const std::vector<GpuNode> nodes = {gpu_node("a", "a1", 1, "us"), gpu_node("a", "a2", 3, "us"),
                                      gpu_node("b", "b1", 2, "eu")};
  const std::vector<GpuNode> chosen = choose_gpus(nodes, 5);
  EXPECT_EQ(sum_free(chosen), 5);
  std::set<std::string> names;
  for (const GpuNode& g : chosen) names.insert(g.cluster + "/" + g.name);
  // a (4 free) then b (2 free); within them a2 (3), b1 (2) fill 5 without a1.
  EXPECT_EQ(names, (std::set<std::string>{"a/a2", "b/b1"}));
}

TEST(ChooseGpus, NotEnoughSaysHowManyAreNeededAndFree) {
  const std::vector<GpuNode> nodes = {gpu_node("a", "a1", 2, "us"), gpu_node("b", "b1", 1, "eu")};
  try {
    choose_gpus(nodes, 4);
    FAIL() << "expected NotEnoughGpus";
  } catch (const NotEnoughGpus& e) {
    EXPECT_STREQ(e.what(), "needs 4 GPUs; 3 free in 2 reachable member cluster(s)");
  }
  EXPECT_THROW(choose_gpus({}, 1), NotEnoughGpus);
}

TEST(PlaceJob, EveryTaskletOnOneChosenGpuAndTheSplitCoversTheModel) {
  const std::vector<GpuNode> nodes = {gpu_node("a", "a1", 1, "us"), gpu_node("a", "a2", 1, "us"),
                                      gpu_node("b", "b1", 1, "eu"), gpu_node("b", "b2", 1, "eu")};
  const api::TrainingJob j = small_job(2, 2);
  const JobPlacement placed = place_job(j, nodes);
  ASSERT_EQ(placed.tasklets.size(), 4u);
  std::set<std::string> used;
  for (size_t rank = 0; rank < placed.tasklets.size(); ++rank) {
    const TaskletPlace& t = placed.tasklets[rank];
    EXPECT_EQ(t.rank, static_cast<int>(rank));
    EXPECT_EQ(t.rank, t.replica * 2 + t.stage);
    used.insert(t.cluster + "/" + t.node);
  }
  EXPECT_EQ(used.size(), 4u) << "one GPU per node: every tasklet on its own node";
  int layers = 0;
  for (int l : placed.layer_split) layers += l;
  EXPECT_EQ(layers, 4);
  EXPECT_GT(placed.placement.predicted_iteration_s, 0);
  // Without annotations every pair is estimated.
  EXPECT_EQ(placed.topology.measured_pairs, 0);
  EXPECT_EQ(placed.topology.estimated_pairs, 6);
}

TEST(PlaceJob, ASlowLinkBetweenClustersKeepsEachStageGroupInsideOneCluster) {
  // Two clusters joined by a slow measured link: the data-parallel groups (the heavy traffic)
  // should not straddle it; the pipeline hop crosses it once per replica.
  std::vector<GpuNode> nodes = {gpu_node("a", "a1", 1, "us"), gpu_node("a", "a2", 1, "us"),
                                gpu_node("b", "b1", 1, "eu"), gpu_node("b", "b2", 1, "eu")};
  for (GpuNode& n : nodes) {
    api::NodeLinks links;
    for (const GpuNode& peer : nodes) {
      if (&peer == &n) continue;
      const bool same = peer.cluster == n.cluster;
      links.peers[peer.cluster + "/" + peer.name] = {
          same ? 0.2 : 120.0, same ? 0.3 : 150.0, same ? 5.0 : 0.05, same ? 50.0 : 0.2,
          kube::format_rfc3339(std::chrono::system_clock::now())};
    }
    n.annotations[api::kLinksAnnotation] = api::format_node_links(links);
  }
  const api::TrainingJob j = small_job(2, 2);
  const JobPlacement placed = place_job(j, nodes);
  EXPECT_EQ(placed.topology.measured_pairs, 6);
  EXPECT_EQ(placed.topology.estimated_pairs, 0);
  for (int stage = 0; stage < 2; ++stage) {
    std::set<std::string> clusters;
    for (const TaskletPlace& t : placed.tasklets) {
      if (t.stage == stage) clusters.insert(t.cluster);
    }
    EXPECT_EQ(clusters.size(), 1u) << "stage " << stage << "'s replicas straddle the slow link";
  }
}

TEST(PlacementStatus, ReadsBackIntoTheSameTasklets) {
  const std::vector<GpuNode> nodes = {gpu_node("a", "a1", 2, "us"), gpu_node("b", "b1", 2, "eu")};
  const api::TrainingJob j = small_job(2, 2);
  const JobPlacement placed = place_job(j, nodes);
  const json status = placement_status(placed, j);
  EXPECT_EQ(status["generation"], 3);
  EXPECT_EQ(status["clusters"], "a,b");
  ASSERT_EQ(status["stages"].size(), 2u);
  int layers = 0;
  for (const json& s : status["stages"]) layers += s["layers"].get<int>();
  EXPECT_EQ(layers, 4);
  const std::vector<TaskletPlace> back = tasklets_from_status(status, j);
  ASSERT_EQ(back.size(), placed.tasklets.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].cluster, placed.tasklets[i].cluster);
    EXPECT_EQ(back[i].node, placed.tasklets[i].node);
    EXPECT_EQ(back[i].stage, placed.tasklets[i].stage);
    EXPECT_EQ(back[i].replica, placed.tasklets[i].replica);
  }
}

// A re-placement keeps the split status.placement shows (the checkpoints hold each stage's
// layers), on other GPUs and at another width; a split that does not fit the job is not read.
TEST(PlaceJob, AKeptLayerSplitIsThePlacementsSplit) {
  const std::vector<GpuNode> nodes = {gpu_node("a", "a1", 2, "us"), gpu_node("b", "b1", 2, "eu")};
  const api::TrainingJob j = small_job(2, 2, 6);
  json status = placement_status(place_job(j, nodes), j);
  status["stages"][0]["layers"] = 5;
  status["stages"][1]["layers"] = 1;
  const std::vector<int> kept = layers_from_status(status, j);
  ASSERT_EQ(kept, (std::vector<int>{5, 1}));
  const JobPlacement again =
      place_job(small_job(2, 1, 6), {gpu_node("b", "b1", 2, "eu")}, nullptr, kept);
  EXPECT_EQ(again.placement.layer_split, kept);
  EXPECT_EQ(again.layer_split, kept);
  status["stages"][1]["layers"] = 2;
  EXPECT_TRUE(layers_from_status(status, j).empty()) << "7 layers of a 6-layer model";
  status["stages"][1]["layers"] = 0;
  EXPECT_TRUE(layers_from_status(status, j).empty()) << "a stage without layers";
  EXPECT_TRUE(layers_from_status(json::object(), j).empty());
  EXPECT_THROW(place_job(j, nodes, nullptr, {6}), std::invalid_argument);
}

TEST(PlacementStatus, AStatusThatDoesNotFitTheJobGivesNoTasklets) {
  const api::TrainingJob j = small_job(2, 2);
  EXPECT_TRUE(tasklets_from_status(json::object(), j).empty());
  EXPECT_TRUE(tasklets_from_status(json{{"stages", "x"}}, j).empty());
  json one_stage = {{"stages",
                     {{{"stage", 0},
                       {"layers", 4},
                       {"replicas",
                        {{{"replica", 0}, {"cluster", "a"}, {"node", "n"}},
                         {{"replica", 1}, {"cluster", "a"}, {"node", "m"}}}}}}}};
  EXPECT_TRUE(tasklets_from_status(one_stage, j).empty()) << "stage 1 is missing";
  json twice = one_stage;
  twice["stages"].push_back(twice["stages"][0]);
  EXPECT_TRUE(tasklets_from_status(twice, j).empty()) << "stage 0 twice";
  json out_of_range = one_stage;
  out_of_range["stages"].push_back(one_stage["stages"][0]);
  out_of_range["stages"][1]["stage"] = 7;
  EXPECT_TRUE(tasklets_from_status(out_of_range, j).empty());
}

}  // namespace
}  // namespace tessel::controller
