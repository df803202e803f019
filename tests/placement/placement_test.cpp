// The placement contract: pipelines, stages and rank map agree, and JSON round-trips.
#include "placement/placement.h"

#include <gtest/gtest.h>

#include <set>

#include "placement/paper_cost.h"
#include "test_topologies.h"

namespace tessel::placement {
namespace {

struct Planned {
  Topology topology = testing::scenario("5-worldwide-geo.yaml");
  PaperCostModel paper{topology, {8, 8}, {0.65, 0.47125}};
  FullCostModel full{topology, {8, 8}, workload_preset("gpt3-1.3b"), {}};
  SearchOptions options;
  Placement placement;
  Planned() {
    options.evaluations = 300;
    options.seed = 7;
    placement = build_placement(topology, paper, full, search_placement(paper, options), options);
  }
};

TEST(Placement, EveryDeviceRunsExactlyOneTasklet) {
  const Planned p;
  const Placement& pl = p.placement;
  ASSERT_EQ(pl.rank_map.size(), 64u);
  std::set<int> devices;
  for (const RankEntry& e : pl.rank_map) {
    EXPECT_EQ(e.rank, e.replica * 8 + e.stage);
    EXPECT_EQ(pl.pipelines[e.replica][e.stage], e.device);
    EXPECT_EQ(pl.stages[e.stage][e.replica], e.device);
    devices.insert(e.device);
  }
  EXPECT_EQ(devices.size(), 64u);
  int layers = 0;
  for (int l : pl.layer_split) layers += l;
  EXPECT_EQ(layers, 24);
}

TEST(Placement, PipelinesRealiseTheCostModelsHops) {
  const Planned p;
  const Placement& pl = p.placement;
  ASSERT_EQ(pl.hop_bottleneck_s.size(), 7u);
  double path = 0;
  for (int s = 0; s < 7; ++s) {
    double worst = 0;
    for (const auto& pipe : pl.pipelines) {
      const int a = pipe[s], b = pipe[s + 1];
      worst = std::max(worst, p.topology.latency_ms(a, b) / 1000 +
                                  8 * 0.47125 / p.topology.bandwidth_gbps(a, b));
    }
    EXPECT_DOUBLE_EQ(worst, pl.hop_bottleneck_s[s]);  // the matching achieves the bottleneck
    path += worst;
  }
  EXPECT_NEAR(2 * path, pl.cost.pipeline_s, 1e-9);
}

TEST(Placement, JsonRoundTripsAndCarriesTheContractFields) {
  const Planned p;
  const nlohmann::json j = placement_to_json(p.placement);
  for (const char* key : {"cost", "predicted_iteration_s", "evaluations", "elapsed_s", "stages",
                          "pipelines", "rank_map", "layer_split", "convergence"})
    EXPECT_TRUE(j.contains(key)) << key;
  for (const char* key : {"total_s", "data_parallel_s", "pipeline_s"})
    EXPECT_TRUE(j["cost"].contains(key)) << key;
  EXPECT_TRUE(j["stages"][0].contains("devices"));
  EXPECT_TRUE(j["pipelines"][0].contains("devices"));
  const Placement back = placement_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back.pipelines, p.placement.pipelines);
  EXPECT_EQ(back.stages, p.placement.stages);
  EXPECT_EQ(back.layer_split, p.placement.layer_split);
  EXPECT_EQ(back.convergence, p.placement.convergence);
  EXPECT_DOUBLE_EQ(back.cost.total_s, p.placement.cost.total_s);
  EXPECT_THROW(placement_from_json(nlohmann::json{{"format_version", 1}}), std::invalid_argument);
}

TEST(Placement, TableAndYamlNameTheSites) {
  const Planned p;
  const std::string table = placement_to_table(p.placement, p.topology);
  EXPECT_NE(table.find("Oregon"), std::string::npos);
  EXPECT_NE(table.find("stage"), std::string::npos);
  const std::string yaml = placement_to_yaml(p.placement);
  EXPECT_NE(yaml.find("rank_map:"), std::string::npos);
  EXPECT_NE(yaml.find("total_s:"), std::string::npos);
}

}  // namespace
}  // namespace tessel::placement
