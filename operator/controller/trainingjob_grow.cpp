#include "kube/api_error.h"
#include "kube/object.h"
#include "operator/controller/conditions.h"
#include "operator/controller/labels.h"
#include "operator/controller/trainingjob_reconciler.h"
#include "operator/controller/trainingjob_reconciler_internal.h"

namespace tessel::controller {

using nlohmann::json;
using namespace trainingjob;

std::optional<kube::ReconcileResult> TrainingJobReconciler::grow(const api::TrainingJob& job,
                                                                 json& status) {
  const std::string key = job.namespace_name + "/" + job.name;
  const auto steady_now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    const auto it = grow_checked_.find(key);
    if (it != grow_checked_.end() && steady_now - it->second < options_.pending_recheck)
      return std::nullopt;
    grow_checked_[key] = steady_now;
  }
  std::vector<std::string> notes;
  std::vector<GpuNode> nodes;
  {
    std::lock_guard placing(placing_);
    nodes = candidates(job, notes);  // the job's own pods hold no GPUs here
  }
  const std::set<NodeRef> avoid = excluded_set(live_exclusions(status, now()));
  std::erase_if(nodes, [&](const GpuNode& n) { return avoid.contains({n.cluster, n.name}); });
  const int free = free_gpus(nodes);
  if (free < job.spec.devices()) return std::nullopt;

  const json& object = job.object;
  const int full = job.spec.parallelism.replicas;
  const std::string message =
      "Growing from " + std::to_string(width_of(status, job)) + " to " + std::to_string(full) +
      " data-parallel replicas: " + std::to_string(free) + " GPUs are free for the " +
      std::to_string(job.spec.devices()) +
      " needed; the stage pods checkpoint as they stop and the job resumes at full width.";
  delete_remote_objects(object, /*pods_only=*/true);
  // The next attempt's processes rendezvous afresh.
  stages_.unregister_job(key);
  status["resizes"] = resizes_of(status) + 1;
  status["phase"] = "Pending";
  json& conditions = status["conditions"];
  set_condition(conditions, {"FullWidth", "False", "Growing", message}, job.generation, now_text());
  set_condition(conditions, {"Running", "False", "Growing", message}, job.generation, now_text());
  set_condition(conditions, {"Ready", "False", "Growing", message}, job.generation, now_text());
  set_condition(conditions, {"Placed", "False", "Growing", message}, job.generation, now_text());
  record(object, kube::EventType::kNormal, "Growing", message);
  return write_status(object, std::move(status), {.requeue_after = std::chrono::seconds(1)});
}

}  // namespace tessel::controller
