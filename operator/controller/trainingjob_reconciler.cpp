#include "operator/controller/trainingjob_reconciler.h"

#include <sys/random.h>

#include <iomanip>
#include <sstream>

#include "api/manifest_error.h"
#include "api/stage_job_file.h"
#include "kube/api_error.h"
#include "kube/base64.h"
#include "kube/object.h"
#include "operator/controller/conditions.h"
#include "operator/controller/labels.h"
#include "operator/controller/trainingjob_reconciler_internal.h"

namespace tessel::controller {

using nlohmann::json;
using Clock = std::chrono::system_clock;
using namespace trainingjob;

namespace {

// metadata.creationTimestamp; nullopt when absent or malformed.
std::optional<Clock::time_point> creation_time(const json& object) {
  const json metadata = object.value("metadata", json::object());
  const json created = metadata.value("creationTimestamp", json());
  return created.is_string() ? parse_rfc3339(created.get<std::string>()) : std::nullopt;
}

std::string random_token() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) throw std::runtime_error("getrandom failed for a job token");
    got += static_cast<size_t>(n);
  }
  std::ostringstream out;
  for (unsigned char b : bytes) out << std::hex << std::setw(2) << std::setfill('0') << int(b);
  return out.str();
}

// The token of the job's hub Secret; throws naming the Secret when it holds none.
std::string secret_token(const json& secret) {
  const json data = secret.value("data", json::object());
  std::optional<std::string> token;
  if (data.contains("token") && data["token"].is_string()) {
    token = kube::base64_decode(data["token"].get<std::string>());
  }
  if (!token || token->size() < 16) {
    throw std::runtime_error("Secret " + kube::object_namespace(secret) + "/" +
                             kube::object_name(secret) +
                             ": data.token is missing or shorter than 16 bytes (delete the "
                             "Secret and the operator makes a new token)");
  }
  return *token;
}

}  // namespace

TrainingJobReconciler::TrainingJobReconciler(kube::Client& hub, kube::ResourceInfo jobs_resource,
                                             const kube::ObjectStore& jobs, MemberRegistry& members,
                                             StageChannel& stages, kube::EventRecorder& events,
                                             TrainingJobReconcilerOptions options)
    : hub_(hub),
      jobs_resource_(std::move(jobs_resource)),
      jobs_(jobs),
      members_(members),
      stages_(stages),
      events_(events),
      options_(std::move(options)),
      logger_(options_.logger ? options_.logger
                              : std::make_shared<const kube::Logger>("trainingjob-controller")) {}

Clock::time_point TrainingJobReconciler::now() const {
  return options_.now ? options_.now() : Clock::now();
}

std::string TrainingJobReconciler::now_text() const { return kube::format_rfc3339(now()); }

void TrainingJobReconciler::record(const json& job, kube::EventType type, const std::string& reason,
                                   const std::string& message) {
  events_.record(job, type, reason, message);
}

std::vector<std::string> TrainingJobReconciler::waiting_jobs() const {
  std::lock_guard lock(mutex_);
  return {waiting_.begin(), waiting_.end()};
}

kube::ReconcileResult TrainingJobReconciler::reconcile(const std::string& key) {
  const kube::ObjectSnapshot snapshot = jobs_.get(key);
  if (!snapshot) {
    // Objects of a job that is gone are orphans: its finalizer was removed by hand, or the job
    // went while this operator was down. The objects a job has are only made by a reconcile of
    // its key while the job is in the store, so none of these can be a newer job's.
    const int orphans = sweep_orphans(key);
    stages_.unregister_job(key);
    if (options_.on_progress) options_.on_progress(key, nullptr);
    std::lock_guard lock(mutex_);
    waiting_.erase(key);
    progress_written_.erase(key);
    // Terminating pods are the kubelets' to finish; a member that did not answer is tried again.
    if (orphans > 0) return {.requeue_after = std::chrono::seconds(10)};
    return {};
  }
  const json& object = *snapshot;
  const json spec = object.value("spec", json::object());
  if (spec.value("managedBy", std::string(kOperatorManager)) != kOperatorManager) return {};
  if (kube::is_being_deleted(object)) return finalize(object);
  if (!kube::has_finalizer(object, kCleanupFinalizer)) {
    json updated = object;
    kube::add_finalizer(updated, kCleanupFinalizer);
    hub_.update(jobs_resource_, updated);  // a 409 throws: the queue retries with fresh state
    return {};                             // the update brings the job back through the informer
  }

  json status = object.value("status", json::object());
  const int64_t generation = kube::object_generation(object);
  json& conditions = status["conditions"];
  api::TrainingJob job;
  try {
    job = api::parse_trainingjob(object, "TrainingJob " + key);
  } catch (const api::ManifestError& e) {
    set_condition(conditions, {"Valid", "False", "InvalidSpec", e.what()}, generation, now_text());
    if (phase_of(status).empty()) status["phase"] = "Pending";
    status["observedGeneration"] = generation;
    return write_status(object, std::move(status), {});
  }
  set_condition(conditions, {"Valid", "True", "Valid", "The spec is valid."}, generation,
                now_text());
  status["observedGeneration"] = generation;

  const std::string uid = kube::object_uid(object);
  const std::string phase = phase_of(status);
  if (phase == "Succeeded" || phase == "Failed") {
    // Terminal: nothing here ever starts, fails or restarts it again.
    stages_.unregister_job(key);
    remove_strays(object, status);
    return write_status(object, std::move(status), {});
  }

  // Nothing below may read a member's missing pod as gone before its caches have listed: an
  // operator that has just started would fail a running job (PodsGone) or start a second copy
  // of one elsewhere while the first still runs there.
  if (!members_not_listed().empty()) return {.requeue_after = std::chrono::milliseconds(500)};
  const auto pods = pods_of(uid);
  // Pods in a member that does not answer are what its cache last showed: they neither hold up
  // a new attempt elsewhere nor can they be deleted until it answers (each reconcile tries).
  const std::set<std::string> away = unreachable_members();
  size_t pod_count = 0, reachable_pods = 0;
  for (const auto& [cluster, list] : pods) {
    pod_count += list.size();
    if (!away.contains(cluster)) reachable_pods += list.size();
  }
  const bool active = phase == "Starting" || phase == "Running";

  if (job.spec.suspend) {
    {
      std::lock_guard lock(mutex_);
      waiting_.erase(key);
    }
    status["phase"] = "Suspended";
    set_condition(conditions, {"Running", "False", "Suspended", "The job is suspended."},
                  generation, now_text());
    if (pod_count > 0) {
      delete_remote_objects(object, /*pods_only=*/true);
      set_condition(conditions,
                    {"Suspended", "True", "Suspending",
                     "Stopping " + std::to_string(pod_count) +
                         " stage pods; each checkpoints before it exits."},
                    generation, now_text());
      return write_status(object, std::move(status),
                          {.requeue_after = std::chrono::milliseconds(2000)});
    }
    // What the stages reported up to their exit (the checkpoint each wrote as it stopped), before
    // the job's progress is let go: it says where training resumes.
    if (std::optional<json> last = final_progress_status(
            stages_.progress(key), status.value("progress", json()), std::nullopt,
            job.spec.training.steps, double(job.spec.global_batch) * job.spec.model.seq_len,
            now_text())) {
      status["progress"] = std::move(*last);
    }
    std::string message = "The stage pods are stopped";
    if (status.contains("progress") && status["progress"].contains("lastCheckpointStep")) {
      message += "; training resumes from the checkpoint of step " +
                 status["progress"]["lastCheckpointStep"].dump();
    }
    // Once, when the pods are gone: the reconcile that deleted them set Suspended True already
    // (reason Suspending), so the status alone does not say whether this was announced.
    const json* suspended = find_condition(conditions, "Suspended");
    if (!suspended || !condition_is_true(conditions, "Suspended") ||
        suspended->value("reason", "") != "Suspended") {
      record(object, kube::EventType::kNormal, "Suspended", message + ".");
    }
    set_condition(conditions, {"Suspended", "True", "Suspended", message + "."}, generation,
                  now_text());
    if (find_condition(conditions, "Placed")) {
      set_condition(conditions, {"Placed", "False", "Suspended", message + "."}, generation,
                    now_text());
    }
    return write_final_status(key, object, std::move(status));
  }
  if (find_condition(conditions, "Suspended")) {
    set_condition(conditions, {"Suspended", "False", "Resumed", "The job is not suspended."},
                  generation, now_text());
  }
  // Every rank reported its last step: the run is over whatever its pods do as they exit (a node
  // lost, a pod deleted or failing on the way out does not restart finished training).
  if (active) {
    if (const std::optional<JobProgress> reported = stages_.progress(key);
        reported && training_finished(*reported)) {
      return succeed(job, status, reported, std::nullopt, reported->world_size);
    }
  }
  // A failed attempt not yet replaced: a node of it found not Ready since is the cause.
  if (!active) blame_lost_node(job, status);

  if (pod_count == 0 || (!active && reachable_pods == 0)) {
    // Pods just created that the members' caches do not show yet: not gone, on their way.
    if (has_assumed(uid)) return {.requeue_after = std::chrono::milliseconds(500)};
    if (active) {
      // The pods went away under the job (deleted by someone, or their nodes lost).
      const json placed = status.value("placement", json::object());
      const std::string where =
          placed.contains("clusters") && placed["clusters"].is_string()
              ? " from member cluster(s) " + placed["clusters"].get<std::string>()
              : "";
      return fail_attempt(job, status, {"PodsGone", "its stage pods are gone" + where, {}});
    }
    if (pod_count > 0) delete_remote_objects(object, /*pods_only=*/true);
    // Back off after a failed attempt. fail_attempt flips Placed from True to False (reason
    // Restarting), so its lastTransitionTime is when the last attempt was torn down (the
    // Running condition may have been False since an earlier restart and would not move).
    const int backoff = job.spec.failure_policy.backoff_seconds;
    if (const json* c = find_condition(conditions, "Placed");
        backoff > 0 && c && c->value("reason", "") == "Restarting") {
      // Times have whole seconds: the teardown was before the next one.
      const auto ready_at = parse_rfc3339(c->value("lastTransitionTime", "")).value_or(now()) +
                            std::chrono::seconds(1 + backoff);
      if (now() < ready_at) {
        return write_status(
            object, std::move(status),
            {.requeue_after = std::chrono::duration_cast<kube::Clock::duration>(ready_at - now()) +
                              std::chrono::milliseconds(100)});
      }
    }
    return start(job, status);
  }

  // Pods of an earlier attempt, or being deleted: the gang they belong to is being torn down.
  // A new attempt waits until they are gone (they hold their GPUs, and its pods take the same
  // names); one of the current attempt going away under a starting or running job fails it.
  // Under a starting or running job, pods of an earlier attempt (left in a member that did not
  // answer when that attempt was torn down) are deleted without touching the current one's.
  const int64_t attempt = attempt_of(status);
  const std::string attempt_text = std::to_string(attempt);
  std::string stale, going;
  int stale_count = 0, earlier_count = 0;
  for (const auto& [cluster, list] : pods) {
    if (away.contains(cluster) && !active) continue;
    for (const json& pod : list) {
      const bool deleting = kube::is_being_deleted(pod);
      const bool current = kube::get_annotation(pod, kAttemptAnnotation) == attempt_text;
      if (!current) ++earlier_count;
      if (current && deleting && going.empty())
        going = cluster + "/" + kube::object_name(pod) + " is being deleted";
      if (deleting || !current) {
        ++stale_count;
        if (stale.empty())
          stale = cluster + "/" + kube::object_name(pod) +
                  (current ? " is being deleted" : " is left from an earlier start attempt");
      }
    }
  }
  if (active && !going.empty()) return fail_attempt(job, status, {"PodsGone", going, {}});
  if (active && earlier_count > 0) {
    delete_labelled(kube::object_namespace(object),
                    remote_selector(options_.hub_id, kube::object_uid(object)), /*pods_only=*/true,
                    key, /*spare_attempt=*/attempt_text);
  } else if (stale_count > 0) {
    delete_remote_objects(object, /*pods_only=*/true);
    set_condition(conditions,
                  {"Ready", "False", "PodsTerminating",
                   "Waiting for " + std::to_string(stale_count) +
                       " stage pod(s) of the last start attempt to terminate (" + stale + ")."},
                  generation, now_text());
    return write_status(object, std::move(status),
                        {.requeue_after = std::chrono::milliseconds(1000)});
  }

  // Pods exist: follow the gang of the current attempt, at the width it was placed at.
  const int width = width_of(status, job);
  const api::TrainingJob placed_job = at_width(job, width);
  std::vector<TaskletPlace> tasklets =
      tasklets_from_status(status.value("placement", json::object()), placed_job);
  if (tasklets.empty()) {
    std::lock_guard lock(mutex_);
    if (const auto it = placed_.find(uid); it != placed_.end()) tasklets = it->second;
  }
  if (tasklets.empty()) {
    // Pods without a placement to judge them by (status lost or edited): start over.
    delete_remote_objects(object, /*pods_only=*/true);
    return write_status(object, std::move(status),
                        {.requeue_after = std::chrono::milliseconds(1000)});
  }
  const std::map<NodeRef, std::string> lost = lost_nodes(pods);
  std::set<NodeRef> lost_set;
  for (const auto& [node, why] : lost) lost_set.insert(node);
  const GangState gang = observe_gang(tasklets, job.name, pods, attempt, lost_set);
  if (active) note_member_reachability(job, status, tasklets);
  stages_.register_job(key, api::stage_job_id(uid, attempt), static_cast<int>(tasklets.size()),
                       token_for(object));
  const std::optional<JobProgress> progress = stages_.progress(key);
  if (options_.on_progress) options_.on_progress(key, progress ? &*progress : nullptr);
  const double tokens_per_step = double(job.spec.global_batch) * job.spec.model.seq_len;

  if (gang.all_succeeded()) {
    return succeed(job, status, progress, finished_figures(gang.termination_messages),
                   gang.expected);
  }
  if (!gang.lost.empty()) {
    std::vector<std::string> nodes;
    for (const NodeRef& n : gang.lost)
      nodes.push_back(n.cluster + "/" + n.node + " (" + lost.at(n) + ")");
    return fail_attempt(job, status,
                        {"NodeNotReady",
                         "node " + join(nodes, ", ") + " is not Ready under stage pod(s) " +
                             join(gang.on_lost_nodes, ", "),
                         gang.lost});
  }
  if (gang.failed) {
    std::vector<NodeRef> at_fault;
    if (gang.failed_node) at_fault.push_back(*gang.failed_node);
    return fail_attempt(job, status, {"PodFailed", *gang.failed, at_fault});
  }
  if (progress && !progress->failures.empty()) {
    return fail_attempt(job, status, {"StageFailed", progress->failures.front(), {}});
  }

  if (!gang.all_running()) {
    std::optional<Clock::time_point> created;
    for (const auto& [cluster, list] : pods) {
      for (const json& pod : list) {
        const auto t = creation_time(pod);
        if (t && (!created || *t < *created)) created = t;
      }
    }
    // creationTimestamp has whole seconds: the pod was made before the next one.
    const auto deadline = created.value_or(now()) +
                          std::chrono::seconds(1 + job.spec.failure_policy.start_timeout_seconds);
    if (now() >= deadline) {
      return fail_attempt(
          job, status,
          {"StartTimeout",
           "not every stage pod was Running within startTimeoutSeconds (" +
               std::to_string(job.spec.failure_policy.start_timeout_seconds) +
               " s): " + std::to_string(gang.running) + " of " + std::to_string(gang.expected) +
               " Running" + (gang.missing.empty() ? "" : "; missing " + join(gang.missing, ", ")),
           {}});
    }
    status["phase"] = "Starting";
    set_condition(conditions,
                  {"Ready", "False", "PodsStarting",
                   std::to_string(gang.running) + " of " + std::to_string(gang.expected) +
                       " stage pods Running."},
                  generation, now_text());
    const auto left = std::chrono::duration_cast<kube::Clock::duration>(deadline - now());
    return write_status(object, std::move(status),
                        {.requeue_after = std::min<kube::Clock::duration>(
                             left + std::chrono::milliseconds(100), std::chrono::seconds(5))});
  }

  if (phase != "Running") {
    record(object, kube::EventType::kNormal, "Running",
           "All " + std::to_string(gang.expected) + " stage pods are Running.");
  }
  status["phase"] = "Running";
  set_condition(conditions,
                {"Ready", "True", "PodsRunning",
                 "All " + std::to_string(gang.expected) + " stage pods are Running."},
                generation, now_text());
  set_condition(conditions, {"Running", "True", "Training", "The stages are training."}, generation,
                now_text());
  if (condition_is_true(conditions, "Degraded")) {
    std::string message =
        "All " + std::to_string(gang.expected) + " stage pods of the new attempt are Running";
    const json last = status.value("progress", json::object());
    if (last.contains("lastCheckpointStep"))
      message += "; resumed from the checkpoint of step " + last["lastCheckpointStep"].dump();
    message += ".";
    set_condition(conditions, {"Degraded", "False", "Recovered", message}, generation, now_text());
    record(object, kube::EventType::kNormal, "Recovered", message);
  }
  if (width < job.spec.parallelism.replicas) {
    if (std::optional<kube::ReconcileResult> grown = grow(job, status)) return *grown;
  }
  const auto steady_now = std::chrono::steady_clock::now();
  bool due = false;
  if (progress && progress->step >= 0) {
    {
      std::lock_guard lock(mutex_);
      // Never written is due: steady_clock counts from boot, so a default time point is not
      // "long ago" on a machine up for less than the interval.
      const auto written = progress_written_.find(key);
      due = written == progress_written_.end() ||
            steady_now - written->second >= options_.status_interval;
    }
    if (due) {
      status["progress"] =
          progress_status(*progress, job.spec.training.steps, tokens_per_step, now_text());
    } else if (object.contains("status")) {
      status["progress"] = object["status"].value("progress", json::object());
    }
  }
  // The interval counts from a progress write that landed: one lost to a conflict (the cache a
  // write behind, as it is right after each write while progress events queue reconciles) is
  // due again at once, or a fast job could go on losing every due write and never show a step.
  switch (put_status(object, status)) {
    case StatusWrite::kGone:
      return {};
    case StatusWrite::kConflict:
      return {.requeue = true};
    case StatusWrite::kWritten:
      break;
  }
  if (due) {
    std::lock_guard lock(mutex_);
    progress_written_[key] = steady_now;
  }
  return {.requeue_after =
              std::chrono::duration_cast<kube::Clock::duration>(options_.status_interval)};
}

kube::ReconcileResult TrainingJobReconciler::finalize(const json& job) {
  const std::string key = kube::object_key(job);
  stages_.unregister_job(key);
  if (kube::has_finalizer(job, kCleanupFinalizer)) {
    const int remaining = delete_remote_objects(job, /*pods_only=*/false);
    if (remaining > 0) return {.requeue_after = std::chrono::milliseconds(1000)};
    json updated = job;
    kube::remove_finalizer(updated, kCleanupFinalizer);
    try {
      hub_.update(jobs_resource_, updated);
    } catch (const kube::ApiError& e) {
      if (e.code() != 404) throw;
    }
  }
  std::lock_guard lock(mutex_);
  tokens_.erase(kube::object_uid(job));
  waiting_.erase(key);
  progress_written_.erase(key);
  grow_checked_.erase(key);
  return {};
}

std::string TrainingJobReconciler::token_for(const json& job) {
  const std::string uid = kube::object_uid(job);
  {
    std::lock_guard lock(mutex_);
    if (auto it = tokens_.find(uid); it != tokens_.end()) return it->second;
  }
  // The token lives in a hub Secret the job owns, so an operator that restarts finds it (and
  // garbage collection deletes it with the job).
  const std::string ns = kube::object_namespace(job);
  // Not stage_object_name(): the hub may be a member too, where that name is the member Secret.
  const std::string name = kube::object_name(job) + "-stage-token";
  std::string token;
  try {
    const json secret = hub_.get(resource("Secret"), ns, name);
    token = secret_token(secret);
  } catch (const kube::ApiError& e) {
    if (e.code() != 404) throw;
    token = random_token();
    json secret = {{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"metadata",
                    {{"name", name},
                     {"namespace", ns},
                     {"labels", {{kJobNameLabel, kube::object_name(job)}, {kJobUidLabel, uid}}}}},
                   {"type", "Opaque"},
                   {"stringData", {{"token", token}}}};
    kube::set_controller_reference(secret, job);
    try {
      hub_.create(resource("Secret"), ns, secret);
    } catch (const kube::ApiError& e2) {
      if (e2.code() != 409) throw;
      const json existing = hub_.get(resource("Secret"), ns, name);  // made by a predecessor
      token = secret_token(existing);
    }
  }
  std::lock_guard lock(mutex_);
  tokens_[uid] = token;
  return token;
}

}  // namespace tessel::controller
