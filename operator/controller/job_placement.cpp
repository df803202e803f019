#include "operator/controller/job_placement.h"

#include <algorithm>
#include <map>
#include <memory>

#include "operator/controller/placement_links.h"
#include "placement/full_cost.h"
#include "placement/layer_split.h"
#include "placement/paper_cost.h"
#include "placement/search.h"

namespace tessel::controller {

std::vector<GpuNode> choose_gpus(const std::vector<GpuNode>& nodes, int needed) {
  std::map<std::string, int> free_by_cluster;
  int free = 0;
  for (const GpuNode& node : nodes) {
    free_by_cluster[node.cluster] += node.free_gpus;
    free += node.free_gpus;
  }
  if (free < needed) {
    throw NotEnoughGpus("needs " + std::to_string(needed) + " GPUs; " + std::to_string(free) +
                        " free in " + std::to_string(free_by_cluster.size()) +
                        " reachable member cluster(s)");
  }
  std::vector<std::pair<std::string, int>> clusters(free_by_cluster.begin(), free_by_cluster.end());
  std::stable_sort(clusters.begin(), clusters.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> chosen;
  for (int sum = 0; const auto& [cluster, gpus] : clusters) {
    if (sum >= needed) break;
    chosen.push_back(cluster);
    sum += gpus;
  }
  std::vector<GpuNode> pool;
  for (const GpuNode& node : nodes) {
    if (node.free_gpus > 0 &&
        std::find(chosen.begin(), chosen.end(), node.cluster) != chosen.end()) {
      pool.push_back(node);
    }
  }
  std::stable_sort(pool.begin(), pool.end(),
                   [](const GpuNode& a, const GpuNode& b) { return a.free_gpus > b.free_gpus; });
  std::vector<GpuNode> taken;
  for (GpuNode node : pool) {
    if (needed == 0) break;
    node.free_gpus = std::min(node.free_gpus, needed);
    needed -= node.free_gpus;
    taken.push_back(std::move(node));
  }
  std::sort(taken.begin(), taken.end(), [](const GpuNode& a, const GpuNode& b) {
    return std::tie(a.cluster, a.name) < std::tie(b.cluster, b.name);
  });
  return taken;
}

JobPlacement place_job(const api::TrainingJob& job, const std::vector<GpuNode>& candidates,
                       const std::atomic<bool>* cancel, const std::vector<int>& keep_layers,
                       std::optional<int> keep_sync_every) {
  const api::TrainingJobSpec& spec = job.spec;
  const placement::PartitionShape shape{spec.parallelism.stages, spec.parallelism.replicas};
  JobPlacement out;
  out.topology = build_cluster_topology(choose_gpus(candidates, shape.devices()));
  placement::Workload workload = spec.workload();
  placement::DataParallelMode& mode = workload.data_parallel;
  const bool keep = keep_sync_every && mode.low_communication() && mode.choose_sync_every;
  if (keep) {
    mode.choose_sync_every = false;
    mode.sync_every = *keep_sync_every;
    mode.sync_overhead = placement::kDefaultSyncOverhead;  // the tolerance is for choosing only
  }

  placement::FullCostOptions full;
  full.schedule = spec.parallelism.schedule;
  full.chunks = spec.parallelism.virtual_stages;
  full.overlap = spec.parallelism.overlap;
  const placement::FullCostModel predictor(out.topology.topology, shape, workload, full);
  std::unique_ptr<placement::PaperCostModel> paper;
  if (spec.placement.cost_model == "paper") {
    placement::PaperCostParams params;
    params.c_dp_gb = workload.paper_c_dp_gb(shape.stages);
    params.c_pp_gb = workload.paper_c_pp_gb(shape.replicas);
    paper = std::make_unique<placement::PaperCostModel>(out.topology.topology, shape, params);
  }
  const placement::CostModel& model =
      paper ? static_cast<const placement::CostModel&>(*paper) : predictor;

  placement::SearchOptions options;
  options.strategy = spec.placement.strategy;
  options.evaluations = spec.placement.evaluations;
  options.seed = spec.placement.seed;
  options.threads = 1;  // the operator places one job per worker; its cores serve many jobs
  options.cancel = cancel;
  const placement::SearchResult result = placement::search_placement(model, options);
  out.search_seconds = result.elapsed_s;
  out.placement =
      placement::build_placement(out.topology.topology, model, predictor, result, options);
  if (!keep_layers.empty()) {
    if (keep_layers.size() != out.placement.layer_split.size())
      throw std::invalid_argument("the kept layer split has " + std::to_string(keep_layers.size()) +
                                  " stages, the placement " +
                                  std::to_string(out.placement.layer_split.size()));
    out.placement.layer_split = keep_layers;
  }
  out.layer_split =
      placement::virtual_stage_split(out.placement.layer_split, spec.parallelism.virtual_stages);
  out.data_parallel = placement::choose_data_parallel(
      mode, predictor.schedule(), predictor.pipeline_timing(out.placement.pipelines),
      "spec.dataParallel.syncEvery", "spec.dataParallel.deltaBits");
  if (keep) {
    out.data_parallel.sync_every_kept = true;
    out.data_parallel.sync_every_reason =
        "H=" + std::to_string(mode.sync_every) +
        ": kept from the job's earlier placement, where the planner chose it (its checkpoint "
        "was trained at it)";
  }

  out.tasklets.resize(static_cast<size_t>(shape.devices()));
  for (const placement::RankEntry& entry : out.placement.rank_map) {
    const DevicePlace& where = out.topology.places.at(static_cast<size_t>(entry.device));
    out.tasklets.at(static_cast<size_t>(entry.rank)) = {.rank = entry.rank,
                                                        .stage = entry.stage,
                                                        .replica = entry.replica,
                                                        .cluster = where.cluster,
                                                        .node = where.node};
  }
  return out;
}

nlohmann::json placement_status(const JobPlacement& placed, const api::TrainingJob& job) {
  std::vector<std::string> clusters;
  for (const TaskletPlace& t : placed.tasklets) {
    if (std::find(clusters.begin(), clusters.end(), t.cluster) == clusters.end()) {
      clusters.push_back(t.cluster);
    }
  }
  std::sort(clusters.begin(), clusters.end());
  std::string cluster_list;
  for (const std::string& c : clusters) cluster_list += (cluster_list.empty() ? "" : ",") + c;

  const placement::Placement& p = placed.placement;
  nlohmann::json stages = nlohmann::json::array();
  for (int s = 0; s < job.spec.parallelism.stages; ++s) {
    nlohmann::json replicas = nlohmann::json::array();
    for (const TaskletPlace& t : placed.tasklets) {
      if (t.stage != s) continue;
      const int device = p.stages.at(static_cast<size_t>(s)).at(static_cast<size_t>(t.replica));
      replicas.push_back({{"replica", t.replica},
                          {"cluster", t.cluster},
                          {"node", t.node},
                          {"gpu", placed.topology.places.at(static_cast<size_t>(device)).gpu}});
    }
    stages.push_back({{"stage", s},
                      {"layers", p.layer_split.at(static_cast<size_t>(s))},
                      {"replicas", std::move(replicas)}});
  }
  auto [links, omitted] =
      placement_links(placed, job.spec.parallelism.stages, job.spec.parallelism.replicas);
  nlohmann::json status = {{"generation", job.generation},
                           {"clusters", cluster_list},
                           {"predictedIterationSeconds", std::max(0.0, p.predicted_iteration_s)},
                           {"cost",
                            {{"totalSeconds", std::max(0.0, p.cost.total_s)},
                             {"dataParallelSeconds", std::max(0.0, p.cost.data_parallel_s)},
                             {"pipelineSeconds", std::max(0.0, p.cost.pipeline_s)}}},
                           {"stages", std::move(stages)},
                           {"links", std::move(links)}};
  if (omitted > 0) status["linksOmitted"] = omitted;
  if (const placement::DataParallelChoice& dp = placed.data_parallel; dp.low_communication()) {
    status["dataParallel"] = {{"mode", placement::to_string(dp.mode.kind)},
                              {"syncEvery", dp.mode.sync_every},
                              {"syncEveryChosen", dp.sync_every.has_value() || dp.sync_every_kept},
                              {"syncEveryReason", dp.sync_every_reason},
                              {"deltaBits", dp.mode.delta_bits},
                              {"deltaBitsChosen", dp.delta_bits.has_value()},
                              {"deltaBitsReason", dp.delta_bits_reason}};
  }
  return status;
}

std::optional<int> chosen_sync_every_from_status(const nlohmann::json& status_placement) {
  if (!status_placement.is_object()) return std::nullopt;
  const nlohmann::json dp = status_placement.value("dataParallel", nlohmann::json());
  if (!dp.is_object() || dp.value("syncEveryChosen", nlohmann::json()) != true) return std::nullopt;
  const nlohmann::json h = dp.value("syncEvery", nlohmann::json());
  if (!h.is_number_integer()) return std::nullopt;
  const int64_t value = h.get<int64_t>();
  if (value < 1 || value > placement::kMaxSyncEvery) return std::nullopt;
  return static_cast<int>(value);
}

std::vector<int> layers_from_status(const nlohmann::json& status_placement,
                                    const api::TrainingJob& job) {
  const int stages = job.spec.parallelism.stages;
  if (!status_placement.is_object() || !status_placement.contains("stages") ||
      !status_placement["stages"].is_array()) {
    return {};
  }
  std::vector<int> layers(static_cast<size_t>(stages), 0);
  int64_t sum = 0;
  for (const nlohmann::json& stage : status_placement["stages"]) {
    if (!stage.is_object() || !stage.contains("stage") || !stage["stage"].is_number_integer() ||
        !stage.contains("layers") || !stage["layers"].is_number_integer()) {
      return {};
    }
    const int64_t s = stage["stage"].get<int64_t>(), n = stage["layers"].get<int64_t>();
    if (s < 0 || s >= stages || n < 1 || layers[static_cast<size_t>(s)] != 0) return {};
    layers[static_cast<size_t>(s)] = static_cast<int>(n);
    sum += n;
  }
  int64_t model_layers = 0;
  try {
    model_layers = job.spec.workload().layers;
  } catch (const std::exception&) {
    return {};
  }
  if (sum != model_layers || std::find(layers.begin(), layers.end(), 0) != layers.end()) return {};
  return layers;
}

std::vector<TaskletPlace> tasklets_from_status(const nlohmann::json& status_placement,
                                               const api::TrainingJob& job) {
  const int stages = job.spec.parallelism.stages, replicas = job.spec.parallelism.replicas;
  std::vector<TaskletPlace> tasklets(static_cast<size_t>(stages) * replicas);
  std::vector<bool> seen(tasklets.size(), false);
  if (!status_placement.is_object() || !status_placement.contains("stages") ||
      !status_placement["stages"].is_array()) {
    return {};
  }
  try {
    for (const nlohmann::json& stage : status_placement["stages"]) {
      const int s = stage.at("stage").get<int>();
      for (const nlohmann::json& r : stage.at("replicas")) {
        const int replica = r.at("replica").get<int>();
        if (s < 0 || s >= stages || replica < 0 || replica >= replicas) return {};
        const int rank = replica * stages + s;
        if (seen[static_cast<size_t>(rank)]) return {};
        seen[static_cast<size_t>(rank)] = true;
        tasklets[static_cast<size_t>(rank)] = {.rank = rank,
                                               .stage = s,
                                               .replica = replica,
                                               .cluster = r.at("cluster").get<std::string>(),
                                               .node = r.at("node").get<std::string>()};
      }
    }
  } catch (const nlohmann::json::exception&) {
    return {};
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) return {};
  return tasklets;
}

}  // namespace tessel::controller
