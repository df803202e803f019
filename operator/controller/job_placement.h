// The placement of one TrainingJob on the free GPUs of its member clusters, as the reconciler
// needs it: which GPUs, which tasklet (stage, replica) on which of them, the layer split, and
// the status.placement the job shows. Pure: the caller gathered the candidate nodes.
//
// The cost model partitions exactly stages x replicas devices, so the GPUs are chosen first:
// the fewest member clusters (those with the most free GPUs first), and within them the fewest
// nodes (the fullest first). The search (the job's strategy and cost model, its evaluation
// budget and seed) then decides which tasklet goes where on them.
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/trainingjob.h"
#include "operator/controller/candidate_nodes.h"
#include "operator/controller/cluster_topology.h"
#include "operator/controller/pod_builder.h"
#include "placement/data_parallel_choice.h"
#include "placement/placement.h"

namespace tessel::controller {

// Fewer free GPUs than the job needs; what() says how many it needs and how many are free.
class NotEnoughGpus : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The nodes whose GPUs the job gets, each with free_gpus cut to what it gives (exactly
// `needed` in all), in cluster then node name order. Throws NotEnoughGpus.
std::vector<GpuNode> choose_gpus(const std::vector<GpuNode>& nodes, int needed);

struct JobPlacement {
  ClusterTopology topology;  // of the chosen GPUs
  placement::Placement placement;
  std::vector<int> layer_split;        // per virtual stage (chunk c of stage p at c x P + p)
  std::vector<TaskletPlace> tasklets;  // index = rank = replica x stages + stage
  double search_seconds = 0;
  // The data-parallel mode as the job runs on this placement: H and bits from the spec, or the
  // planner's choice for the placement (the H it was priced at), or the kept H; and why.
  placement::DataParallelChoice data_parallel;
};

// Chooses the GPUs and searches. Throws NotEnoughGpus, placement::TopologyError (a topology
// limit), or std::invalid_argument (a search option out of range). `cancel` stops the search
// early (the operator losing leadership).
//
// keep_layers (per stage; empty: none) is the split of an earlier placement of the job: its
// checkpoints hold each stage's layers, so a re-placement keeps it. The search cannot take a
// fixed split (the cost model splits the layers for each stage order it tries), so the search's
// own split is replaced by it afterwards; the predicted figures are those of the search's split.
//
// keep_sync_every (set: the H the planner chose at an earlier placement, which the job's
// checkpoint was trained at) replaces the planner's choice where the spec leaves H out: the
// search prices every layout at it, and data_parallel says it was kept.
JobPlacement place_job(const api::TrainingJob& job, const std::vector<GpuNode>& candidates,
                       const std::atomic<bool>* cancel = nullptr,
                       const std::vector<int>& keep_layers = {},
                       std::optional<int> keep_sync_every = std::nullopt);

// The H the planner chose at the job's last placement (status.placement.dataParallel, written by
// placement_status), when it chose one that is within the runtime's bounds; else nullopt.
std::optional<int> chosen_sync_every_from_status(const nlohmann::json& status_placement);

// The per-stage layers of a status.placement (placement_status) that fit the job: one entry per
// stage, each at least 1 and summing to the model's layers; empty otherwise.
std::vector<int> layers_from_status(const nlohmann::json& status_placement,
                                    const api::TrainingJob& job);

// status.placement of the TrainingJob (crds/tessel.dev_trainingjobs.yaml): the generation it
// was made for, the clusters, the predicted iteration, the cost breakdown, per stage its
// layers and where each replica runs, the links between nodes it rests on
// (placement_links.h), and for a low-communication job dataParallel: the H and bits it runs,
// whether the planner chose each and why.
nlohmann::json placement_status(const JobPlacement& placed, const api::TrainingJob& job);

// The tasklets of a status.placement written by placement_status (what an operator that
// restarted reads back); empty when the status has none or it does not fit the job's shape.
std::vector<TaskletPlace> tasklets_from_status(const nlohmann::json& status_placement,
                                               const api::TrainingJob& job);

}  // namespace tessel::controller
