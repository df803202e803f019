// The result of planning: which device runs which tasklet (stage x replica), and what it
// costs. The contract between `tessel plan` and the tools that consume it (the operator,
// `tessel local`, `tessel simulate`), as a table for people and as JSON/YAML for programs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
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

// Raised for a placement that is malformed or does not fit what it is to run on; what() names
// the source, the field and the reason, e.g.
// "p.json: pipelines[1].devices[0]: device 70 is not in the topology (64 devices, 0..63)".
class PlacementError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A placement file is refused unread past this size: at about 200 bytes a device (three views
// of the devices, the rank map, pretty-printed), 64 MiB holds the placement of 300000 devices,
// far beyond anything the search can place.
inline constexpr size_t kMaxPlacementFileBytes = size_t{64} << 20;
// and past this nesting depth (a placement is 4 deep; "[[[[..." must not exhaust the parser).
inline constexpr int kMaxPlacementJsonDepth = 16;

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
  bool interrupted = false;  // the search was stopped (Ctrl-C) before its budget was spent
  // What it was planned on, besides the id: the device count and topology_fingerprint(). Both
  // are absent (0, "") in placements written before they existed; then they are not checked.
  int topology_devices = 0;
  std::string topology_fingerprint;
};

// The identity of a topology's devices: a 64-bit FNV-1a hash (16 hex digits) of the device
// count and each device's id and site, in id order. GPU types and links are not in it: the
// same devices localized (`tessel local`) or with re-measured links keep their fingerprint.
std::string topology_fingerprint(const Topology& topology);

// Assembles the placement of a partition: stage order and matchings from `model`, the
// pipelines by following the matchings from the first stage (replica r starts at the r-th
// device of stage 0 by id), the layer split, rings and predicted time from `predictor`.
Placement build_placement(const Topology& topology, const CostModel& model,
                          const FullCostModel& predictor, const SearchResult& result,
                          const SearchOptions& options);

nlohmann::json placement_to_json(const Placement& p);
// The JSON form read back, every field checked for presence and type (device ids and counts
// integers in range, costs numbers or null). Throws PlacementError "source: field: why". Only
// the form: check_placement says whether it fits a topology, a shape and a model.
Placement placement_from_json(const nlohmann::json& j, const std::string& source = "placement");
// Reads a `tessel plan --format json` file: at most kMaxPlacementFileBytes, nested at most
// kMaxPlacementJsonDepth, JSON, then placement_from_json. Throws PlacementError naming the path.
Placement read_placement_file(const std::string& path);
// The same for a file's text; `path` names it in errors.
Placement parse_placement_text(const std::string& text, const std::string& path);

// THE check of a placement before anything runs it (`tessel simulate --placement`,
// `tessel local --placement`, the operator): planned for this topology (id, device count and
// fingerprint when the file has them); stages_count x replicas equal to `shape`; one pipeline
// per replica, one device per stage, every device in the topology and used once; the stages
// and rank_map views agreeing with the pipelines; layer_split one entry per stage, each at least
// 1, summing to model_layers (when model_layers > 0); every dp_ring a permutation of its stage's
// devices. Throws PlacementError "source: field: why" at the first fault.
void check_placement(const Placement& p, const Topology& topology, const PartitionShape& shape,
                     int model_layers, const std::string& source);
std::string placement_to_yaml(const Placement& p);
std::string placement_to_table(const Placement& p, const Topology& topology);

}  // namespace tessel::placement
