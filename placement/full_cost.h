// tessel's own cost model (the default): the predicted time of one training iteration of a
// placement. Beyond the paper's objective it models each GPU's compute speed and memory,
// an uneven layer split that balances the slowest device of every stage, the pipeline
// schedule's bubbles (GPipe, 1F1B, interleaved 1F1B), per-micro-batch pipeline messages,
// the ring all-reduce of every stage group, and communication overlapped with compute.
//
// For a balanced partition:
//  1. coarsened graph: edge (j,k) = bottleneck matching value of one micro-batch message
//     (lat + bytes/bw) between groups j and k; stage order = shortest open path (a cycle
//     for the interleaved schedule, whose last stage sends back to the first), taken in the
//     direction (and for a cycle from the start) that gives the shortest iteration;
//  2. each stage runs at its slowest member's speed (peak x utilisation) and must fit its
//     smallest member's memory; layers are split to balance stage times (layer_split.h);
//  3. per stage: forward/backward time per micro-batch, ring all-reduce of its gradients;
//     per hop: the bottleneck pair's latency and transfer time; the tied token table: summed
//     between each replica's first and last stage (the slowest pair of the bottleneck
//     matching), then all-reduced over each of the two stage groups; before the optimizer
//     step one round among all devices (the loss and gradient norm): the longest latency;
//  4. the iteration time from the closed-form schedule model (iteration_model.h).
// In the low-communication mode (workload.data_parallel) step 3's all-reduces run inside each
// site's island only, the per-step sum of loss and norm too, and every H steps each stage
// exchanges its encoded delta between the islands (island_sync.h), amortised over H
// (outer_sync_cost.h). When the planner chooses H (DataParallelMode::choose_sync_every), it is
// chosen for each layout priced, from that layout's inner step and stall (sync_period.h), and
// the timings pipeline_timing() returns carry it.
// A placement whose stages cannot fit in memory costs 1e6 s plus its overflow in GiB, so the
// search still moves towards feasibility.
#pragma once

#include "placement/cost_model.h"
#include "placement/pipeline_timing.h"
#include "placement/workload.h"

namespace tessel::placement {

struct FullCostOptions {
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int chunks = 2;                  // v, interleaved only
  double utilisation = 0.45;       // fraction of peak FLOP/s the stage's kernels achieve
  bool overlap = true;             // communication on its own streams
  double memory_reserve_gib = 2;   // per GPU: CUDA context, NCCL buffers, fragmentation
  double hbm_gbytes_per_s = 2000;  // optimizer step is memory-bound: 36 bytes per parameter
};

inline constexpr double kInfeasibleCost = 1e6;

class FullCostModel final : public CostModel {
 public:
  FullCostModel(const Topology& topology, PartitionShape shape, Workload workload,
                FullCostOptions options);
  std::string name() const override { return "full"; }
  std::unique_ptr<CostScratch> make_scratch() const override;
  double cost(const Groups& groups, CostScratch& scratch) const override;
  Evaluation evaluate(const Groups& groups) const override;
  // The same, with the stage order given (e.g. the one another cost model chose).
  Evaluation evaluate_in_order(const Groups& groups, const std::vector<int>& stage_group) const;

  // The per-stage and per-hop timing of explicit pipelines (pipelines[r][s] = device): the
  // stage groups are their columns, each hop costs what the slowest replica's pair costs.
  // This is what `tessel simulate` replays. layer_split, when given, receives the split.
  PipelineTiming pipeline_timing(const std::vector<std::vector<int>>& pipelines,
                                 std::vector<int>* layer_split = nullptr) const;

  const Workload& workload() const { return workload_; }
  const ScheduleSpec& schedule() const { return spec_; }

 private:
  struct Detail;
  // Stage s sends to stage s+1; the interleaved schedule's last stage also sends to the first.
  int hop_count() const {
    const int p = shape_.stages;
    return spec_.kind == ScheduleKind::Interleaved && p > 1 ? p : p - 1;
  }
  double iteration(const Groups& groups, const std::vector<int>& stage_group, CostScratch& scratch,
                   Detail* detail) const;
  // Layer split, stage times, all-reduce times into the scratch's timing (hops left alone).
  void fill_stages(const std::vector<const std::vector<int>*>& members, CostScratch& scratch,
                   Detail* detail) const;
  CostBreakdown finish(CostScratch& scratch) const;
  // The inner step of a complete timing (hops included); when the planner chooses H, sets
  // timing.outer_sync.sync_every to the H chosen for it.
  double settle_sync_every(PipelineTiming& timing) const;
  void step_sum_over_hops(PipelineTiming& timing) const;
  // The tied table's sum between devices a and b (first and last stage of one replica).
  double tie_s(int a, int b) const;
  double best_order(const Groups& groups, CostScratch& scratch, std::vector<int>* best) const;

  Workload workload_;
  FullCostOptions options_;
  ScheduleSpec spec_;
  std::vector<double> in_flight_;     // per stage position, micro-batches of activations
  std::vector<double> flops_per_s_;   // per device, effective
  std::vector<double> memory_bytes_;  // per device, usable
  double message_bytes_ = 0;
  double world_sync_s_ = 0;  // the longest latency between two devices
};

}  // namespace tessel::placement
