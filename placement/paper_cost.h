// The DT-FM paper's objective, exactly as its reference code computes it (paper eq. 1-4):
//   COST = DataP + PipelineP
//   DataP     = max over groups C of max over d in C of
//               sum over e in C, e != d of 2 (lat(d,e)/1000 + 8 c_dp / (D_DP bw(d,e)))
//   PipelineP = 2 x the shortest open path through the coarsened graph whose edge (j,k) is
//               the bottleneck perfect matching value between groups j and k under
//               t(d,e) = lat(d,e)/1000 + 8 c_pp / bw(d,e)
// lat in ms, bw in Gbit/s, c_dp and c_pp in GB (1e9 bytes), result in seconds.
#pragma once

#include "placement/cost_model.h"

namespace tessel::placement {

struct PaperCostParams {
  double c_dp_gb = 0.65;     // one stage's gradients (the reference code's constant)
  double c_pp_gb = 0.47125;  // one replica's activations at a stage boundary (reference)
};

class PaperCostModel final : public CostModel {
 public:
  PaperCostModel(const Topology& topology, PartitionShape shape, PaperCostParams params);
  std::string name() const override { return "paper"; }
  double cost(const Groups& groups, CostScratch& scratch) const override;
  Evaluation evaluate(const Groups& groups) const override;
  const PaperCostParams& params() const { return params_; }

  // DataP of one group (the max over its members of their summed exchanges).
  double data_parallel_cost(const std::vector<int>& group) const;

 private:
  CostBreakdown breakdown(const Groups& groups, CostScratch& scratch,
                          std::vector<int>* order) const;
  PaperCostParams params_;
  // 2 (lat/1000 + 8 c_dp / (D_DP bw)): one member's two exchanges with one other member.
  std::vector<double> exchange_weight_;
};

}  // namespace tessel::placement
