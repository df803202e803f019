// The interface between the search and a cost model, and the machinery both cost models
// share: the coarsened graph (one vertex per data-parallel group, an edge = the bottleneck
// perfect matching between two groups) with per-group and per-pair caching.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "placement/bottleneck_matching.h"
#include "placement/open_path.h"
#include "placement/partition.h"
#include "placement/topology.h"

namespace tessel::placement {

struct CostBreakdown {
  double total_s = 0;          // the objective
  double data_parallel_s = 0;  // the slowest data-parallel group's gradient exchange
  double pipeline_s = 0;       // pipeline part (paper: 2 x the open path; full: pipeline time)
  bool feasible = true;        // full mode: every stage fits its GPUs' memory
};

// One hop of the chosen pipeline order: which member of the earlier group feeds which member
// of the later one, achieving the bottleneck value.
struct HopMatching {
  int from_stage = 0;
  int to_stage = 0;
  double bottleneck_s = 0;       // the slowest matched pair's weight
  std::vector<int> from_device;  // pairs (from_device[i], to_device[i])
  std::vector<int> to_device;
};

// Everything a cost model knows about one partition, for output.
struct Evaluation {
  CostBreakdown cost;
  std::vector<int> stage_group;            // stage_group[s] = index of the group that runs stage s
  std::vector<HopMatching> hops;           // stage s -> s+1 (and last -> first for interleaved)
  std::vector<int> layer_split;            // layers per stage (full mode; paper mode: even split)
  double predicted_iteration_s = 0;        // full-mode iteration time of this placement
  std::vector<std::vector<int>> dp_rings;  // per stage: ring order of its group (full mode)
};

// Per-thread scratch: caches keyed by device-set keys, and workspaces of the exact solvers.
// Cost models are immutable and shared; each thread evaluates with its own scratch.
struct CostScratch {
  virtual ~CostScratch() = default;
  std::unordered_map<uint64_t, double> group_term;  // e.g. DataP of one group
  std::unordered_map<uint64_t, double> pair_term;   // coarsened edge of two groups
  BottleneckWorkspace matching;
  OpenPathWorkspace path;
  std::vector<double> h;       // G x G coarsened graph
  std::vector<double> sub;     // D x D weights between two groups
  std::vector<uint64_t> keys;  // one per group
  uint64_t hits = 0, misses = 0;
  void bound_caches(size_t limit = size_t{1} << 20);
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  const PartitionShape& shape() const { return shape_; }
  int devices() const { return shape_.devices(); }

  virtual std::unique_ptr<CostScratch> make_scratch() const;
  // The objective of a balanced partition (seconds; lower is better). Thread-safe.
  virtual double cost(const Groups& groups, CostScratch& scratch) const = 0;
  // Full detail (stage order, matchings, split...) of a partition, for output.
  virtual Evaluation evaluate(const Groups& groups) const = 0;

  // N x N weights the local search reads, row-major, diagonal 0: one pipeline message over a
  // link (hop_weight: t(c_pp) in paper mode), and one stage's gradients over it (sync_weight:
  // t(c_dp) = lat + 8 c_dp / bw, what the Kernighan-Lin gain subtracts).
  const std::vector<double>& hop_weight() const { return hop_weight_; }
  const std::vector<double>& sync_weight() const { return sync_weight_; }

 protected:
  CostModel(const Topology& topology, PartitionShape shape);
  // Fills scratch.keys and scratch.h (G x G, the bottleneck matching value of each pair of
  // groups under hop_weight), using and filling the pair cache.
  void coarsened_graph(const Groups& groups, CostScratch& scratch) const;
  // Exact bottleneck matching between two groups with its pairing (for output).
  HopMatching match_groups(const Groups& groups, int from_group, int to_group) const;

  const Topology& topology_;
  PartitionShape shape_;
  DeviceKeys keys_;
  std::vector<double> hop_weight_;
  std::vector<double> sync_weight_;
};

}  // namespace tessel::placement
