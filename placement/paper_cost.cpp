#include "placement/paper_cost.h"

#include <algorithm>
#include <stdexcept>

namespace tessel::placement {

PaperCostModel::PaperCostModel(const Topology& topology, PartitionShape shape,
                               PaperCostParams params)
    : CostModel(topology, shape), params_(params) {
  if (!(params.c_dp_gb >= 0) || !(params.c_pp_gb >= 0))
    throw std::invalid_argument("c_dp and c_pp must be >= 0 GB");
  const int n = devices();
  const double dp = shape.replicas;
  exchange_weight_.assign(static_cast<size_t>(n) * n, 0.0);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const double lat_s = topology.latency_ms(a, b) / 1000.0;
      const double bw = topology.bandwidth_gbps(a, b);
      const size_t i = static_cast<size_t>(a) * n + b;
      hop_weight_[i] = lat_s + 8.0 * params.c_pp_gb / bw;
      sync_weight_[i] = lat_s + 8.0 * params.c_dp_gb / bw;
      exchange_weight_[i] = 2.0 * (lat_s + 8.0 * params.c_dp_gb / (dp * bw));
    }
  }
}

double PaperCostModel::data_parallel_cost(const std::vector<int>& group) const {
  const int n = devices();
  double worst = 0;
  for (int d : group) {
    double sum = 0;
    const double* row = &exchange_weight_[static_cast<size_t>(d) * n];
    for (int e : group) sum += row[e];  // the diagonal is 0
    worst = std::max(worst, sum);
  }
  return worst;
}

CostBreakdown PaperCostModel::breakdown(const Groups& groups, CostScratch& s,
                                        std::vector<int>* order) const {
  coarsened_graph(groups, s);  // also fills s.keys
  CostBreakdown c;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto [it, inserted] = s.group_term.try_emplace(s.keys[g], 0.0);
    if (inserted) it->second = data_parallel_cost(groups[g]);
    c.data_parallel_s = std::max(c.data_parallel_s, it->second);
  }
  const PathResult path = shortest_open_path(s.h.data(), shape_.stages, s.path);
  c.pipeline_s = 2.0 * path.length;
  c.total_s = c.data_parallel_s + c.pipeline_s;
  if (order) *order = path.order;
  s.bound_caches();
  return c;
}

double PaperCostModel::cost(const Groups& groups, CostScratch& scratch) const {
  return breakdown(groups, scratch, nullptr).total_s;
}

Evaluation PaperCostModel::evaluate(const Groups& groups) const {
  CostScratch scratch;
  Evaluation e;
  e.cost = breakdown(groups, scratch, &e.stage_group);
  for (size_t s = 0; s + 1 < e.stage_group.size(); ++s) {
    HopMatching hop = match_groups(groups, e.stage_group[s], e.stage_group[s + 1]);
    hop.from_stage = static_cast<int>(s);
    hop.to_stage = static_cast<int>(s + 1);
    e.hops.push_back(std::move(hop));
  }
  return e;
}

}  // namespace tessel::placement
