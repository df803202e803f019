// The result of planning: which device runs which tasklet (stage x replica), and what it
// costs. The contract between `tessel plan` and the tools that consume it (the operator,
// `tessel local`, `tessel simulate`), as a table for people and as JSON/YAML for programs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "placement/cost_model.h"
#include "placement/full_cost.h"
#include "placement/search.h"

namespace tessel::placement {

struct RankEntry {
  int rank = 0;  // replica * stages + stage (pipeline rank = rank mod stages)
  int replica = 0;
  int stage = 0;
  int device = 0;
};

struct Placement {
  std::string topology;    // the topology's id
  std::string model;       // the workload's name
  std::string cost_model;  // "paper" or "full"
  std::string strategy;
  std::string schedule;  // the schedule the prediction assumes
  uint64_t seed = 0;
  PartitionShape shape;
  CostBreakdown cost;                       // under cost_model
  double predicted_iteration_s = 0;         // full model, in this placement's stage order
  std::vector<std::vector<int>> stages;     // stages[s][r] = device of replica r at stage s
  std::vector<std::vector<int>> pipelines;  // pipelines[r][s] = the same, by replica
  std::vector<RankEntry> rank_map;
  std::vector<int> layer_split;            // layers per stage
  std::vector<std::vector<int>> dp_rings;  // per stage: all-reduce ring order
  std::vector<double> hop_bottleneck_s;    // per hop s -> s+1: the slowest matched pair
  long evaluations = 0;
  double elapsed_s = 0;
  std::vector<std::pair<long, double>> convergence;
};

// Assembles the placement of a partition: stage order and matchings from `model`, the
// pipelines by following the matchings from the first stage (replica r starts at the r-th
// device of stage 0 by id), the layer split, rings and predicted time from `predictor`.
Placement build_placement(const Topology& topology, const CostModel& model,
                          const FullCostModel& predictor, const SearchResult& result,
                          const SearchOptions& options);

nlohmann::json placement_to_json(const Placement& p);
Placement placement_from_json(const nlohmann::json& j);  // throws std::invalid_argument
std::string placement_to_yaml(const Placement& p);
std::string placement_to_table(const Placement& p, const Topology& topology);

}  // namespace tessel::placement
