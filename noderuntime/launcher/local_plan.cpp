#include "noderuntime/launcher/local_plan.h"

#include <algorithm>
#include <cmath>

#include "noderuntime/launcher/local_topology.h"
#include "placement/full_cost.h"
#include "placement/iteration_model.h"
#include "placement/layer_split.h"

namespace tessel::launcher {
namespace {

// The placement of a `tessel plan --format json` file, checked by placement::check_placement
// (the same check as `tessel simulate --placement`) against the job's topology, pipeline and
// model (its stages and rank_map views must agree with its pipelines). It then records this
// topology's device count and fingerprint, which a placement written before them lacks.
placement::Placement read_placement(const std::string& path, const LocalJob& job,
                                    const placement::Topology& topology) {
  placement::Placement p;
  try {
    p = placement::read_placement_file(path);
    placement::check_placement(p, topology, {job.stages, job.replicas}, job.workload.layers, path);
  } catch (const placement::PlacementError& e) {
    throw LocalJobError(e.what());
  }
  p.topology_devices = topology.size();
  p.topology_fingerprint = placement::topology_fingerprint(topology);
  return p;
}

placement::Placement search(const LocalJob& job, const placement::Topology& topology,
                            const placement::FullCostModel& model) {
  placement::SearchOptions options;
  options.strategy = job.placement.strategy;
  options.evaluations = job.placement.evaluations;
  options.seed = job.placement.seed;
  const placement::SearchResult result = placement::search_placement(model, options);
  return placement::build_placement(topology, model, model, result, options);
}

}  // namespace

placement::FullCostOptions cost_options(const LocalJob& job) {
  placement::FullCostOptions options;
  options.schedule = job.schedule.kind;
  options.chunks = job.chunks();
  options.overlap = job.schedule.overlap;
  return options;
}

namespace {

// Timing, split and simulation of a placement on a localized topology.
void predict(const LocalJob& job, LocalPlan& plan) {
  const placement::PartitionShape shape{job.stages, job.replicas};
  const placement::FullCostModel model(plan.topology, shape, job.workload, cost_options(job));
  plan.timing = model.pipeline_timing(plan.placement.pipelines, &plan.stage_layers);
  plan.spec = model.schedule();
  plan.spec.microbatch_group = job.schedule.microbatch_group;
  plan.layer_split = placement::virtual_stage_split(plan.stage_layers, job.chunks());
  plan.simulation = placement::simulate_iteration(plan.spec, plan.timing);
  plan.closed_form_s = placement::predict_iteration_s(plan.spec, plan.timing);
  plan.data_parallel =
      placement::choose_data_parallel(job.workload.data_parallel, model.schedule(), plan.timing,
                                      "data_parallel.sync_every", "data_parallel.delta_bits");
  // The placement's own figures, recomputed for the network this job really runs on.
  plan.placement.layer_split = plan.stage_layers;
  plan.placement.predicted_iteration_s = plan.closed_form_s;
}

// The share of the cores a computing process gets, averaged over the simulated iteration's
// compute: at each moment the threads of every process computing then (the D replicas run in
// step, so each simulated pipeline rank stands for D processes) share the cores.
double compute_share(const LocalJob& job, const LocalPlan& plan) {
  std::vector<std::pair<double, int>> edges;  // (time, +1 start / -1 end) of compute
  for (const placement::TimedEvent& e : plan.simulation.events) {
    if (e.stream == placement::Stream::ForwardCompute ||
        e.stream == placement::Stream::BackwardCompute ||
        e.stream == placement::Stream::OptimizerStep) {
      edges.emplace_back(e.start_s, +1);
      edges.emplace_back(e.start_s + e.duration_s, -1);
    }
  }
  std::sort(edges.begin(), edges.end());
  const double threads_per_rank = double(job.replicas) * job.training.threads;
  double work = 0, shared = 0;
  int active = 0;
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    active += edges[i].second;
    const double length = edges[i + 1].first - edges[i].first;
    if (active <= 0 || length <= 0) continue;
    work += length * active;
    shared += length * active * std::min(1.0, plan.speed.cores / (active * threads_per_rank));
  }
  return work > 0 ? shared / work : 1.0;
}

}  // namespace

LocalPlan plan_local_job(const LocalJob& job, const placement::Topology& network,
                         const ComputeSpeed& measured, const std::string& placement_file,
                         std::optional<int> keep_sync_every) {
  const placement::DataParallelMode& mode = job.workload.data_parallel;
  if (keep_sync_every && mode.low_communication() && mode.choose_sync_every) {
    LocalJob kept = job;
    kept.workload.data_parallel.choose_sync_every = false;
    kept.workload.data_parallel.sync_every = *keep_sync_every;
    kept.workload.data_parallel.sync_overhead = placement::kDefaultSyncOverhead;  // for choosing
    LocalPlan plan = plan_local_job(kept, network, measured, placement_file);
    plan.data_parallel.sync_every_kept = true;
    plan.data_parallel.sync_every_reason =
        "H=" + std::to_string(*keep_sync_every) +
        ": kept from the run being resumed (its job.json; its checkpoint was trained at it)";
    return plan;
  }
  LocalPlan plan;
  plan.speed = measured;
  plan.topology = localize_topology(network, plan.speed, job.world_size());
  if (placement_file.empty()) {
    const placement::FullCostModel model(plan.topology, {job.stages, job.replicas}, job.workload,
                                         cost_options(job));
    plan.placement = search(job, plan.topology, model);
  } else {
    plan.placement = read_placement(placement_file, job, plan.topology);
  }
  predict(job, plan);
  constexpr int kRefinements = 8;
  for (int i = 0; i < kRefinements; ++i) {
    const double share = compute_share(job, plan);
    if (std::abs(share - plan.speed.share) <= 0.01 * plan.speed.share) break;
    plan.speed.share = std::sqrt(share * plan.speed.share);  // damped: no oscillation
    plan.topology = localize_topology(network, plan.speed, job.world_size());
    predict(job, plan);
  }
  plan.device_of_rank.assign(job.world_size(), -1);
  for (const placement::RankEntry& e : plan.placement.rank_map) {
    plan.device_of_rank[e.rank] = e.device;
  }
  return plan;
}

}  // namespace tessel::launcher
