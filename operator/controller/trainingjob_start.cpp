#include <iomanip>
#include <sstream>

#include "api/link_annotations.h"
#include "api/manifest_error.h"
#include "api/stage_job_file.h"
#include "kube/api_error.h"
#include "kube/object.h"
#include "operator/controller/conditions.h"
#include "operator/controller/labels.h"
#include "operator/controller/pod_builder.h"
#include "operator/controller/stage_links.h"
#include "operator/controller/trainingjob_reconciler.h"
#include "operator/controller/trainingjob_reconciler_internal.h"

namespace tessel::controller {

using nlohmann::json;
using Clock = std::chrono::system_clock;
using namespace trainingjob;

namespace {

// How long a pod the reconciler created holds its GPUs without the member's cache showing it.
// A watch delivers a new pod well within this; a pod deleted before the cache listed it is
// never shown, and must not hold its GPUs forever.
constexpr std::chrono::seconds kAssumedPodTtl{60};

std::string seconds_text(double s) {
  std::ostringstream out;
  out << std::setprecision(3) << s << " s";
  return out.str();
}

}  // namespace

kube::ReconcileResult TrainingJobReconciler::start(const api::TrainingJob& job, json& status) {
  const json& object = job.object;
  const std::string key = job.namespace_name + "/" + job.name;
  const int64_t generation = job.generation;
  json& conditions = status["conditions"];
  std::unique_lock placing(placing_);
  std::vector<std::string> notes;
  std::vector<GpuNode> nodes = candidates(job, notes);
  // Nodes at fault in an earlier attempt are left out while the job fits without them.
  json exclusions = live_exclusions(status, now());
  const std::set<NodeRef> avoid = excluded_set(exclusions);
  std::vector<GpuNode> without_excluded;
  std::vector<std::string> excluded_used;
  for (const GpuNode& node : nodes) {
    if (!avoid.contains({node.cluster, node.name})) without_excluded.push_back(node);
  }
  // A job placed before keeps its layer split: its checkpoints hold each stage's layers.
  const std::vector<int> keep_layers =
      layers_from_status(status.value("placement", json::object()), job);
  // A job that resumes a checkpoint keeps the H the planner chose before (the outer state would
  // take another, but the run's loss per token would change under it without anyone asking);
  // with no checkpoint the planner chooses afresh for the new placement. status and the Placed
  // event say which.
  const json progress = status.value("progress", json::object());
  const std::optional<int> keep_sync_every =
      progress.is_object() && progress.contains("lastCheckpointStep")
          ? chosen_sync_every_from_status(status.value("placement", json::object()))
          : std::nullopt;

  JobPlacement placed;
  int width = 0;
  const auto started = std::chrono::steady_clock::now();
  try {
    // The widest width that fits, without the excluded nodes if it can (elastic jobs only have
    // more than one width).
    for (const int w : job.spec.usable_widths()) {
      const int needed = job.spec.parallelism.stages * w;
      const std::vector<GpuNode>* pool = free_gpus(without_excluded) >= needed ? &without_excluded
                                         : free_gpus(nodes) >= needed          ? &nodes
                                                                               : nullptr;
      if (pool == nullptr) continue;
      placed = place_job(at_width(job, w), *pool, &cancel_, keep_layers, keep_sync_every);
      width = w;
      break;
    }
    if (width == 0) choose_gpus(nodes, static_cast<int>(job.spec.devices()));  // throws
    for (const TaskletPlace& t : placed.tasklets) {
      const std::string name = t.cluster + "/" + t.node;
      if (avoid.contains({t.cluster, t.node}) &&
          std::find(excluded_used.begin(), excluded_used.end(), name) == excluded_used.end())
        excluded_used.push_back(name);
    }
  } catch (const NotEnoughGpus& e) {
    if (options_.on_placement) options_.on_placement(false, 0);
    std::string message = std::string("Waiting for GPUs: ") + e.what();
    if (job.spec.elastic) {
      message += " (elastic: " +
                 std::to_string(job.spec.parallelism.stages * job.spec.usable_widths().back()) +
                 " at the narrowest usable width, " +
                 std::to_string(job.spec.usable_widths().back()) + " replicas)";
    }
    if (!notes.empty()) message += " (" + join(notes, "; ") + ")";
    message += ".";
    if (!condition_is_true(conditions, "Placed") &&
        (find_condition(conditions, "Placed") == nullptr ||
         find_condition(conditions, "Placed")->value("message", "") != message)) {
      record(object, kube::EventType::kWarning, "NotPlaced", message);
    }
    set_condition(conditions, {"Placed", "False", "NotEnoughGPUs", message}, generation,
                  now_text());
    status["phase"] = "Pending";
    {
      std::lock_guard lock(mutex_);
      waiting_.insert(key);
    }
    return write_status(object, std::move(status),
                        {.requeue_after = std::chrono::duration_cast<kube::Clock::duration>(
                             options_.pending_recheck)});
  } catch (const std::exception& e) {  // a topology limit or a search option out of range
    if (options_.on_placement) options_.on_placement(false, 0);
    set_condition(conditions, {"Placed", "False", "PlacementFailed", e.what()}, generation,
                  now_text());
    status["phase"] = "Pending";
    record(object, kube::EventType::kWarning, "NotPlaced", e.what());
    return write_status(object, std::move(status), {.requeue = true});
  }
  const double placement_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (options_.on_placement) options_.on_placement(true, placement_s);
  {
    std::lock_guard lock(mutex_);
    waiting_.erase(key);
    grow_checked_[key] = std::chrono::steady_clock::now();
  }
  const api::TrainingJob placed_job = at_width(job, width);

  // The stage processes' job.json.
  const std::string uid = kube::object_uid(object);
  const std::string token = token_for(object);
  api::StageJobFile file;
  file.job_id = api::stage_job_id(uid, attempt_of(status));
  file.layer_split = placed.layer_split;
  for (const TaskletPlace& t : placed.tasklets) {
    file.ranks.push_back({.stage = t.stage,
                          .replica = t.replica,
                          .host = "0.0.0.0",
                          .port = 0,
                          .island = t.cluster + "/" + t.node});
  }
  if (!job.spec.data.text_path.empty()) {
    file.data_path = job.spec.data.text_path.front() == '/'
                         ? job.spec.data.text_path
                         : options_.data_root + "/" + job.spec.data.text_path;
  }
  file.checkpoint_dir = job.spec.checkpoint.path.empty() ? "checkpoints" : job.spec.checkpoint.path;
  file.checkpoint_resume = true;
  file.checkpoint_shared = false;
  const api::StageEndpoint endpoint{options_.stage_service_address, kStageTokenFromJobFile,
                                    kStageCaFromJobFile};
  file.rendezvous = endpoint;
  file.advertise_env = kPodIpVariable;
  file.progress = endpoint;
  // The network between the pods is the link: its measured bandwidths size the TCP streams.
  const StageLinks links = stage_links(placed);
  file.links = links.links;
  if (links.omitted > 0) {
    logger_->warning("job.json leaves out measured links: those keep one TCP stream",
                     {{"job", key}, {"listed", links.listed}, {"omitted", links.omitted}});
  }

  std::vector<MemberObjects> objects;
  try {
    StageObjectsInput input;
    input.job = &placed_job;
    input.job_uid = uid;
    input.hub_id = options_.hub_id;
    input.tasklets = placed.tasklets;
    // Every stage pod has a GPU: an unset precision is bf16 there (the CUDA backend's; a
    // stage that finds no GPU computes it in fp32 on the CPU), as spec.model.precision says.
    api::TrainingJobSpec spec = placed_job.spec;
    if (!spec.model.precision) spec.model.precision = placement::Precision::BF16;
    if (placed.data_parallel.low_communication()) {  // the numbers the placement was priced at
      spec.data_parallel.sync_every = placed.data_parallel.mode.sync_every;
      spec.data_parallel.delta_bits = placed.data_parallel.mode.delta_bits;
    }
    input.job_json = api::stage_job_text(spec, file);
    input.token = token;
    input.ca_pem = options_.ca_pem;
    input.default_image = options_.stage_image;
    input.attempt = attempt_of(status);
    objects = build_stage_objects(input);
  } catch (const api::ManifestError& e) {  // spec.template cannot be merged, or job.json refused
    set_condition(conditions, {"Valid", "False", "InvalidTemplate", e.what()}, generation,
                  now_text());
    status["phase"] = "Pending";
    return write_status(object, std::move(status), {});
  }

  // All or nothing: on the first refusal, delete what was created and try again later.
  stages_.register_job(key, file.job_id, static_cast<int>(placed.tasklets.size()), token);
  for (const MemberObjects& member : objects) {
    const std::shared_ptr<const MemberView> view = members_.member(member.cluster);
    std::string failure;
    try {
      if (!view) throw std::runtime_error("the member cluster is no longer reachable");
      kube::Client& client = *view->client;
      for (const json* o : {&member.secret, &member.config_map}) {
        const kube::ResourceInfo& info = resource(o == &member.secret ? "Secret" : "ConfigMap");
        try {
          client.create(info, job.namespace_name, *o);
        } catch (const kube::ApiError& e) {
          if (e.code() != 409) throw;  // left by an earlier attempt: replace its content
          json fresh = *o;
          fresh["metadata"]["resourceVersion"] = kube::object_resource_version(
              client.get(info, job.namespace_name, kube::object_name(*o)));
          client.update(info, fresh);
        }
      }
      for (const json& pod : member.pods) client.create(resource("Pod"), job.namespace_name, pod);
      remember_assumed(member.cluster, member.pods);
    } catch (const std::exception& e) {
      failure = member.cluster + ": " + e.what();
    }
    if (!failure.empty()) {
      delete_remote_objects(object, /*pods_only=*/false);
      stages_.unregister_job(key);
      const std::string message = "Could not create the stage objects in member " + failure;
      set_condition(conditions, {"Placed", "False", "CreateFailed", message}, generation,
                    now_text());
      status["phase"] = "Pending";
      record(object, kube::EventType::kWarning, "CreateFailed", message);
      return write_status(object, std::move(status), {.requeue = true});
    }
  }

  {
    std::lock_guard lock(mutex_);
    placed_[uid] = placed.tasklets;
  }
  status["placement"] = placement_status(placed, placed_job);
  status["phase"] = "Starting";
  status["replicas"] = width;
  if (exclusions.empty()) {
    status.erase("excludedNodes");
  } else {
    status["excludedNodes"] = exclusions;  // without the expired entries
  }
  if (!status.contains("startTime")) status["startTime"] = now_text();
  std::string summary =
      std::to_string(job.spec.parallelism.stages) + " stages x " + std::to_string(width) +
      " replicas on " + status["placement"]["clusters"].get<std::string>() +
      ": predicted iteration " + seconds_text(placed.placement.predicted_iteration_s) + ", cost " +
      seconds_text(placed.placement.cost.total_s) + " (data-parallel " +
      seconds_text(placed.placement.cost.data_parallel_s) + ", pipeline " +
      seconds_text(placed.placement.cost.pipeline_s) + "); " +
      std::to_string(placed.topology.measured_pairs) + " node pairs measured, " +
      std::to_string(placed.topology.estimated_pairs) +
      " estimated from regions and zones; placed in " + seconds_text(placement_s) + ".";
  if (const placement::DataParallelChoice& dp = placed.data_parallel; dp.low_communication()) {
    summary += " Data parallelism " + placement::data_parallel_name(dp.mode) + " (" +
               dp.sync_every_reason + "; " + dp.delta_bits_reason + ").";
  }
  if (!excluded_used.empty()) {
    summary += " Uses " + join(excluded_used, ", ") +
               ", excluded after a failure, as the job does not fit without them.";
  }
  set_condition(conditions, {"Placed", "True", "Placed", summary}, generation, now_text());
  if (job.spec.elastic) {
    const int full = job.spec.parallelism.replicas;
    if (width < full) {
      const std::string message =
          "Running " + std::to_string(width) + " of " + std::to_string(full) +
          " data-parallel replicas (elastic.minReplicas " +
          std::to_string(job.spec.elastic->min_replicas) + "): the GPUs for " +
          std::to_string(full) + " are not free (" + std::to_string(job.spec.devices()) +
          " needed). The global batch stays " + std::to_string(job.spec.global_batch) + ": " +
          std::to_string(job.spec.global_batch / (width * job.spec.micro_batch)) +
          " micro-batches per replica instead of " +
          std::to_string(job.spec.global_batch / (full * job.spec.micro_batch)) + ".";
      set_condition(conditions, {"FullWidth", "False", "Shrunk", message}, generation, now_text());
      record(object, kube::EventType::kWarning, "Shrunk", message);
    } else {
      set_condition(conditions,
                    {"FullWidth", "True", "FullWidth",
                     "Running all " + std::to_string(full) + " data-parallel replicas."},
                    generation, now_text());
    }
  }
  if (placed.topology.estimated_pairs > 0) {
    set_condition(
        conditions,
        {"LinksMeasured", "False", "LinksEstimated",
         std::to_string(placed.topology.estimated_pairs) + " of " +
             std::to_string(placed.topology.estimated_pairs + placed.topology.measured_pairs) +
             " node pairs have no prober measurement; their links were estimated "
             "from topology.kubernetes.io region and zone labels" +
             (placed.topology.notes.empty() ? "" : " (" + join(placed.topology.notes, "; ") + ")") +
             "."},
        generation, now_text());
  } else {
    set_condition(
        conditions,
        {"LinksMeasured", "True", "LinksMeasured",
         placed.topology.aggregated_pairs == 0
             ? "Every node pair of the placement was measured by the prober."
             : "Every node pair of the placement was measured by the prober; " +
                   std::to_string(placed.topology.aggregated_pairs) + " of the " +
                   std::to_string(placed.topology.measured_pairs) +
                   " rest on a node's site aggregate (" + join(placed.topology.notes, "; ") + ")."},
        generation, now_text());
  }
  set_condition(conditions, {"Ready", "False", "PodsCreated", "The stage pods were created."},
                generation, now_text());
  record(object, kube::EventType::kNormal, "Placed", summary);
  // A node of this placement (the topology holds only those) whose links annotation was refused.
  for (const RejectedLinks& r : placed.topology.rejected) {
    record(object, kube::EventType::kWarning, "BadLinkAnnotation",
           "Node " + r.cluster + "/" + r.node + ": its " + api::kLinksAnnotation +
               " annotation was refused and its links estimated: " + r.reason);
  }
  size_t created = 0;
  for (const MemberObjects& member : objects) created += member.pods.size();
  record(object, kube::EventType::kNormal, "PodsCreated",
         "Created " + std::to_string(created) + " stage pods in " + std::to_string(objects.size()) +
             " member cluster(s).");
  return write_status(object, std::move(status),
                      {.requeue_after = std::chrono::milliseconds(2000)});
}

std::vector<GpuNode> TrainingJobReconciler::candidates(const api::TrainingJob& job,
                                                       std::vector<std::string>& notes) {
  std::vector<GpuNode> out;
  const std::string uid = kube::object_uid(job.object);
  std::map<std::string, std::vector<AssumedPod>> assumed;
  {
    std::lock_guard lock(mutex_);
    assumed = assumed_;
  }
  const auto expired = std::chrono::steady_clock::now() - kAssumedPodTtl;
  for (const std::shared_ptr<const MemberView>& member : members_.members()) {
    // A member that does not answer: its caches show its GPUs as they were.
    if (!member->synced || member->suspended || member->reachable.status == "False") continue;
    if (!job.spec.placement.cluster_selector.matches(member->labels)) continue;
    std::vector<json> pods = member->pods();
    // Assumed pods the cache has not shown yet still hold their GPUs.
    std::vector<AssumedPod>& mine = assumed[member->name];
    std::erase_if(mine, [&](const AssumedPod& a) {
      return a.created < expired || std::any_of(pods.begin(), pods.end(), [&](const json& p) {
               return kube::object_namespace(p) == kube::object_namespace(a.pod) &&
                      kube::object_name(p) == kube::object_name(a.pod) &&
                      kube::get_label(p, kJobUidLabel) == kube::get_label(a.pod, kJobUidLabel);
             });
    });
    for (const AssumedPod& a : mine) pods.push_back(a.pod);
    Candidates c = candidate_nodes(member->name, member->region, member->nodes(), pods,
                                   job.spec.placement.gpu_selector, uid);
    for (GpuNode& node : c.nodes) out.push_back(std::move(node));
    for (const ExcludedNode& e : c.excluded)
      notes.push_back(e.cluster + "/" + e.name + ": " + e.reason);
  }
  {
    std::lock_guard lock(mutex_);
    assumed_ = std::move(assumed);
  }
  return out;
}

void TrainingJobReconciler::remember_assumed(const std::string& cluster,
                                             const std::vector<json>& pods) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  for (const json& pod : pods) assumed_[cluster].push_back({pod, now});
}

void TrainingJobReconciler::pod_observed(const std::string& cluster, const json& pod) {
  std::lock_guard lock(mutex_);
  const auto it = assumed_.find(cluster);
  if (it == assumed_.end()) return;
  std::erase_if(it->second, [&](const AssumedPod& a) {
    return kube::object_namespace(pod) == kube::object_namespace(a.pod) &&
           kube::object_name(pod) == kube::object_name(a.pod) &&
           kube::get_label(pod, kJobUidLabel) == kube::get_label(a.pod, kJobUidLabel);
  });
}

void TrainingJobReconciler::forget_attempt(const std::string& uid) {
  std::lock_guard lock(mutex_);
  placed_.erase(uid);
  for (auto& [cluster, pods] : assumed_) {
    std::erase_if(pods,
                  [&](const AssumedPod& a) { return kube::get_label(a.pod, kJobUidLabel) == uid; });
  }
}

bool TrainingJobReconciler::has_assumed(const std::string& uid) const {
  std::lock_guard lock(mutex_);
  const auto expired = std::chrono::steady_clock::now() - kAssumedPodTtl;
  for (const auto& [cluster, pods] : assumed_) {
    for (const AssumedPod& a : pods) {
      if (a.created >= expired && kube::get_label(a.pod, kJobUidLabel) == uid) return true;
    }
  }
  return false;
}

}  // namespace tessel::controller
