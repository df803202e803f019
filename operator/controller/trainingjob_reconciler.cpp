#include "operator/controller/trainingjob_reconciler.h"

#include <sys/random.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <iomanip>
#include <sstream>

#include "api/link_annotations.h"
#include "api/manifest_error.h"
#include "api/stage_job_file.h"
#include "kube/api_error.h"
#include "kube/base64.h"
#include "kube/object.h"
#include "operator/controller/conditions.h"
#include "operator/controller/gang.h"
#include "operator/controller/labels.h"
#include "operator/controller/pod_builder.h"
#include "placement/topology.h"

namespace tessel::controller {
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

const kube::ResourceInfo& resource(const std::string& kind) {
  for (const kube::ResourceInfo& info : kube::builtin_resources()) {
    if (info.gvr.group.empty() && info.kind == kind) return info;
  }
  throw std::logic_error("no core resource " + kind);
}

// How long a pod the reconciler created holds its GPUs without the member's cache showing it.
// A watch delivers a new pod well within this; a pod deleted before the cache listed it is
// never shown, and must not hold its GPUs forever.
constexpr std::chrono::seconds kAssumedPodTtl{60};

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

// An RFC 3339 time with whole seconds ("2026-11-26T05:00:00Z"); nullopt when malformed.
std::optional<Clock::time_point> parse_rfc3339(const std::string& text) {
  std::tm tm{};
  std::istringstream in(text);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return std::nullopt;
  return Clock::from_time_t(timegm(&tm));
}

// metadata.creationTimestamp; nullopt when absent or malformed.
std::optional<Clock::time_point> creation_time(const json& object) {
  const json metadata = object.value("metadata", json::object());
  const json created = metadata.value("creationTimestamp", json());
  return created.is_string() ? parse_rfc3339(created.get<std::string>()) : std::nullopt;
}

std::string join(const std::vector<std::string>& items, const std::string& separator,
                 size_t limit = 8) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) {
    out += (i ? separator : "") + items[i];
  }
  if (items.size() > limit)
    out += separator + "and " + std::to_string(items.size() - limit) + " more";
  return out;
}

std::string seconds_text(double s) {
  std::ostringstream out;
  out << std::setprecision(3) << s << " s";
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

int64_t restarts_of(const json& status) {
  return status.contains("restarts") && status["restarts"].is_number_integer()
             ? status["restarts"].get<int64_t>()
             : 0;
}

int64_t resizes_of(const json& status) {
  return status.contains("resizes") && status["resizes"].is_number_integer()
             ? status["resizes"].get<int64_t>()
             : 0;
}

// The start attempt the current pods carry (kAttemptAnnotation): every restart and every resize
// starts a new one, so that pods of the last are told from the next's.
int64_t attempt_of(const json& status) { return restarts_of(status) + resizes_of(status); }

// The data-parallel width the job is placed at: status.replicas when it is one the spec allows,
// else the spec's.
int width_of(const json& status, const api::TrainingJob& job) {
  const std::vector<int> widths = job.spec.usable_widths();
  if (status.contains("replicas") && status["replicas"].is_number_integer()) {
    const int64_t width = status["replicas"].get<int64_t>();
    if (std::find(widths.begin(), widths.end(), width) != widths.end())
      return static_cast<int>(width);
  }
  return job.spec.parallelism.replicas;
}

// The job as one of `width` data-parallel replicas runs it: the same global batch, more
// micro-batches per replica.
api::TrainingJob at_width(const api::TrainingJob& job, int width) {
  api::TrainingJob narrowed = job;
  narrowed.spec.parallelism.replicas = width;
  return narrowed;
}

// status.excludedNodes: at most this many (the CRD's maxItems), the oldest dropped first; each
// for this long, after which a healed node is used again.
constexpr size_t kMaxExcludedNodes = 32;
constexpr std::chrono::minutes kExcludedNodeTtl{30};

// status.excludedNodes without the entries expired at `now`.
json live_exclusions(const json& status, Clock::time_point now) {
  json out = json::array();
  for (const json& e : status.value("excludedNodes", json::array())) {
    const auto expires = parse_rfc3339(e.value("expiresAt", ""));
    if (expires && *expires > now) out.push_back(e);
  }
  return out;
}

std::set<NodeRef> excluded_set(const json& exclusions) {
  std::set<NodeRef> out;
  for (const json& e : exclusions) out.insert({e.value("cluster", ""), e.value("node", "")});
  return out;
}

int free_gpus(const std::vector<GpuNode>& nodes) {
  int free = 0;
  for (const GpuNode& n : nodes) free += n.free_gpus;
  return free;
}

std::string phase_of(const json& status) {
  return status.contains("phase") && status["phase"].is_string()
             ? status["phase"].get<std::string>()
             : "";
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
            stages_.progress(key), status.value("progress", json()), job.spec.training.steps,
            double(job.spec.global_batch) * job.spec.model.seq_len, now_text())) {
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
      return succeed(job, status, reported, reported->world_size);
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

  if (gang.all_succeeded()) return succeed(job, status, progress, gang.expected);
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
  if (progress && progress->step >= 0) {
    const auto steady_now = std::chrono::steady_clock::now();
    bool due = false;
    {
      std::lock_guard lock(mutex_);
      auto& last = progress_written_[key];
      if (steady_now - last >= options_.status_interval) {
        last = steady_now;
        due = true;
      }
    }
    if (due) {
      status["progress"] =
          progress_status(*progress, job.spec.training.steps, tokens_per_step, now_text());
    } else if (object.contains("status")) {
      status["progress"] = object["status"].value("progress", json::object());
    }
  }
  return write_status(object, std::move(status),
                      {.requeue_after = std::chrono::duration_cast<kube::Clock::duration>(
                           options_.status_interval)});
}

kube::ReconcileResult TrainingJobReconciler::succeed(const api::TrainingJob& job, json& status,
                                                     const std::optional<JobProgress>& progress,
                                                     int ranks) {
  const json& object = job.object;
  const int64_t generation = job.generation;
  json& conditions = status["conditions"];
  status["phase"] = "Succeeded";
  status["completionTime"] = now_text();
  if (std::optional<json> last = final_progress_status(
          progress, status.value("progress", json()), job.spec.training.steps,
          double(job.spec.global_batch) * job.spec.model.seq_len, now_text())) {
    status["progress"] = std::move(*last);
  }
  set_condition(conditions, {"Running", "False", "Succeeded", "Training finished."}, generation,
                now_text());
  set_condition(conditions,
                {"Succeeded", "True", "Succeeded",
                 "All " + std::to_string(ranks) + " stage ranks finished " +
                     std::to_string(job.spec.training.steps) + " steps."},
                generation, now_text());
  const json loss = status.value("/progress/loss"_json_pointer, json());
  record(object, kube::EventType::kNormal, "Succeeded",
         "Trained " + std::to_string(job.spec.training.steps) + " steps" +
             (loss.is_number() ? "; final loss " + loss.dump() : std::string()) + ".");
  return write_final_status(job.namespace_name + "/" + job.name, object, std::move(status));
}

void TrainingJobReconciler::blame_lost_node(const api::TrainingJob& job, json& status) {
  json& conditions = status["conditions"];
  const json* degraded = find_condition(conditions, "Degraded");
  if (!degraded || !condition_is_true(conditions, "Degraded") ||
      degraded->value("reason", "") == "NodeNotReady") {
    return;
  }
  // status.placement is still the failed attempt's: start() replaces it with the next one's.
  const std::vector<TaskletPlace> tasklets = tasklets_from_status(
      status.value("placement", json::object()), at_width(job, width_of(status, job)));
  std::map<std::string, std::vector<json>> bound;  // a stand-in pod per node, for lost_nodes
  for (const TaskletPlace& t : tasklets)
    bound[t.cluster].push_back({{"spec", {{"nodeName", t.node}}}});
  const std::map<NodeRef, std::string> lost = lost_nodes(bound);
  if (lost.empty()) return;
  std::vector<std::string> names;
  std::vector<NodeRef> nodes;
  for (const auto& [node, why] : lost) {
    names.push_back(node.cluster + "/" + node.node + " (" + why + ")");
    nodes.push_back(node);
  }
  const std::string first = degraded->value("reason", "") + ": " + degraded->value("message", "");
  // The node's loss is what the peers' link failures, a pod failing on it, or its pods going
  // were consequences of; they are usually seen first (a peer's socket breaks at once, a
  // Node's NotReady comes through its member's API server).
  const std::string message = "node " + join(names, ", ") +
                              " of the failed start attempt is not Ready; what was seen first " +
                              "follows from it (" + first + ")";
  record(job.object, kube::EventType::kWarning, "Degraded", "NodeNotReady: " + message);
  set_condition(conditions, {"Degraded", "True", "NodeNotReady", message}, job.generation,
                now_text());
  exclude_nodes(status, nodes, "NodeNotReady");
}

void TrainingJobReconciler::remove_strays(const json& job, const json& status) {
  // The pods a finished job keeps are its last attempt's that finished. Any other was made from
  // a stale view (an operator that lost its leadership while it started an attempt).
  const std::string attempt = std::to_string(attempt_of(status));
  const bool succeeded = phase_of(status) == "Succeeded";
  bool strays = false;
  for (const auto& [cluster, list] : pods_of(kube::object_uid(job))) {
    for (const json& pod : list) {
      const std::string pod_phase = pod.value("status", json::object()).value("phase", "");
      const bool kept = succeeded && kube::get_annotation(pod, kAttemptAnnotation) == attempt;
      if (!kept && !kube::is_being_deleted(pod) && pod_phase != "Succeeded" &&
          pod_phase != "Failed")
        strays = true;
    }
  }
  if (!strays) return;
  logger_->warning("deleting stage pods of a finished job that are not its last attempt's",
                   {{"job", kube::object_key(job)}, {"phase", phase_of(status)}});
  delete_labelled(kube::object_namespace(job),
                  remote_selector(options_.hub_id, kube::object_uid(job)), /*pods_only=*/true,
                  kube::object_key(job), /*spare_attempt=*/succeeded ? attempt : "");
}

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
      placed = place_job(at_width(job, w), *pool, &cancel_, keep_layers);
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

  // Pods are made only from the job as the API holds it now: a cache behind it must not start
  // an attempt of a job that finished, or restarted, meanwhile (under another operator, or under
  // this one before a leadership it lost). A list without a resourceVersion is a consistent
  // read, and list is what the chart's role grants on TrainingJobs (not get).
  kube::ListOptions by_name;
  by_name.field_selector = "metadata.name=" + job.name;
  const json live =
      hub_.list(jobs_resource_, job.namespace_name, by_name).value("items", json::array());
  if (live.empty()) return {};  // gone
  if (kube::object_resource_version(live.front()) != kube::object_resource_version(object)) {
    logger_->info("not starting an attempt from a cached job behind the API; retrying",
                  {{"job", key}});
    return {.requeue = true};
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

void TrainingJobReconciler::exclude_nodes(json& status, const std::vector<NodeRef>& nodes,
                                          const std::string& reason) {
  // The nodes at fault, newest last, each once; the oldest go beyond the bound.
  json exclusions = live_exclusions(status, now());
  for (const NodeRef& node : nodes) {
    json kept = json::array();
    for (const json& e : exclusions) {
      if (e.value("cluster", "") != node.cluster || e.value("node", "") != node.node)
        kept.push_back(e);
    }
    exclusions = std::move(kept);
    exclusions.push_back({{"cluster", node.cluster},
                          {"node", node.node},
                          {"reason", reason},
                          {"time", now_text()},
                          {"expiresAt", kube::format_rfc3339(now() + kExcludedNodeTtl)}});
  }
  while (exclusions.size() > kMaxExcludedNodes) exclusions.erase(exclusions.begin());
  status["excludedNodes"] = std::move(exclusions);
}

kube::ReconcileResult TrainingJobReconciler::fail_attempt(const api::TrainingJob& job, json& status,
                                                          const Failure& failure) {
  const json& object = job.object;
  const std::string key = job.namespace_name + "/" + job.name;
  const int64_t generation = job.generation;
  const std::string& why = failure.message;
  json& conditions = status["conditions"];
  const bool announce = !condition_is_true(conditions, "Degraded");
  set_condition(conditions, {"Degraded", "True", failure.reason, why}, generation, now_text());
  if (!failure.nodes.empty()) {
    exclude_nodes(status, failure.nodes,
                  failure.reason == "NodeNotReady" ? "NodeNotReady" : "PodFailed");
  }
  const int64_t restarts = restarts_of(status);
  const bool give_up = restarts >= job.spec.failure_policy.max_restarts;
  std::string message;
  if (give_up) {
    status["phase"] = "Failed";
    status["completionTime"] = now_text();
    message = "Failed after " + std::to_string(restarts) +
              " restart(s) (failurePolicy.maxRestarts " +
              std::to_string(job.spec.failure_policy.max_restarts) + "): " + why;
    set_condition(conditions, {"Running", "False", "Failed", message}, generation, now_text());
    set_condition(conditions, {"Failed", "True", "BackoffLimitExceeded", message}, generation,
                  now_text());
  } else {
    status["restarts"] = restarts + 1;
    status["phase"] = "Pending";
    message = "Restarting (" + std::to_string(restarts + 1) + " of " +
              std::to_string(job.spec.failure_policy.max_restarts) + ") after " +
              std::to_string(job.spec.failure_policy.backoff_seconds) +
              " s, from the last checkpoint: " + why;
    set_condition(conditions, {"Running", "False", "Restarting", message}, generation, now_text());
    set_condition(conditions, {"Ready", "False", "Restarting", message}, generation, now_text());
    set_condition(conditions, {"Placed", "False", "Restarting", message}, generation, now_text());
  }
  // The decision is written before anything is torn down: the write carries the resourceVersion
  // the decision was made on, so a decision on a stale cache (the job has moved on, finished
  // perhaps) conflicts and nothing is deleted; a crash after the write leaves pods of an earlier
  // attempt, which the next reconcile deletes.
  switch (put_status(object, status)) {
    case StatusWrite::kConflict:
      return {.requeue = true};
    case StatusWrite::kGone:
      return {};
    case StatusWrite::kWritten:
      break;
  }
  if (announce) record(object, kube::EventType::kWarning, "Degraded", failure.reason + ": " + why);
  record(object, kube::EventType::kWarning, give_up ? "Failed" : "Restarting", message);
  // The next attempt's processes rendezvous afresh, and the failures this one reported must
  // not fail that one too: the stage service forgets the job until it is placed again.
  stages_.unregister_job(key);
  const int remaining = delete_remote_objects(object, /*pods_only=*/true);
  if (give_up) return {};
  return {.requeue_after = std::chrono::seconds(remaining > 0 ? 1 : 0) +
                           std::chrono::seconds(job.spec.failure_policy.backoff_seconds)};
}

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

void TrainingJobReconciler::note_member_reachability(const api::TrainingJob& job, json& status,
                                                     const std::vector<TaskletPlace>& tasklets) {
  std::set<std::string> clusters;
  for (const TaskletPlace& t : tasklets) clusters.insert(t.cluster);
  std::vector<std::string> away;
  for (const std::string& cluster : clusters) {
    const std::shared_ptr<const MemberView> view = members_.member(cluster);
    if (!view) {
      away.push_back(cluster + " (no usable kubeconfig)");
    } else if (view->reachable.status == "False") {
      away.push_back(cluster + " (" + view->reachable.reason + ": " + view->reachable.message +
                     ")");
    }
  }
  json& conditions = status["conditions"];
  const json* current = find_condition(conditions, "MembersReachable");
  const bool was_away = current && current->value("status", "") == "False";
  if (!away.empty()) {
    const std::string since =
        was_away ? current->value("lastTransitionTime", now_text()) : now_text();
    const std::string message =
        "Not answering since " + since + ": " + join(away, "; ") +
        ". Their stage pods, last seen Running, are left training: they report progress to the "
        "stage service directly.";
    if (!was_away) record(job.object, kube::EventType::kWarning, "MemberUnreachable", message);
    set_condition(conditions, {"MembersReachable", "False", "MemberUnreachable", message},
                  job.generation, now_text());
  } else if (was_away) {
    const std::string message = "Every member cluster of the placement answers again.";
    record(job.object, kube::EventType::kNormal, "MemberReachable", message);
    set_condition(conditions, {"MembersReachable", "True", "Reachable", message}, job.generation,
                  now_text());
  }
}

std::map<NodeRef, std::string> TrainingJobReconciler::lost_nodes(
    const std::map<std::string, std::vector<json>>& pods) const {
  std::map<NodeRef, std::string> out;
  for (const auto& [cluster, list] : pods) {
    const std::shared_ptr<const MemberView> view = members_.member(cluster);
    // A member that does not answer shows its Nodes as last seen: nothing to judge them by.
    if (!view || !view->synced || view->reachable.status == "False") continue;
    for (const json& pod : list) {
      const std::string name = pod.value("spec", json::object()).value("nodeName", "");
      if (name.empty() || out.contains({cluster, name})) continue;
      const std::shared_ptr<const json> node = view->node(name);
      if (!node) {
        out[{cluster, name}] = "the Node is gone";
        continue;
      }
      if (node_ready(*node)) continue;
      std::string ready = "no Ready condition";
      for (const json& c :
           node->value("status", json::object()).value("conditions", json::array())) {
        if (c.value("type", "") == "Ready")
          ready = "Ready " + c.value("status", std::string()) + ": " +
                  c.value("reason", std::string("no reason"));
      }
      out[{cluster, name}] = ready;
    }
  }
  return out;
}

std::set<std::string> TrainingJobReconciler::unreachable_members() const {
  std::set<std::string> out;
  for (const std::shared_ptr<const MemberView>& member : members_.members()) {
    if (member->reachable.status == "False") out.insert(member->name);
  }
  return out;
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

TrainingJobReconciler::StatusWrite TrainingJobReconciler::put_status(const json& job,
                                                                     const json& status) {
  if (job.value("status", json::object()) == status) return StatusWrite::kWritten;
  json updated = job;
  updated["status"] = status;
  try {
    hub_.update_status(jobs_resource_, updated);
  } catch (const kube::ApiError& e) {
    if (e.code() == 404) return StatusWrite::kGone;
    if (e.code() == 409) return StatusWrite::kConflict;  // a newer job is on its way to the cache
    throw;
  }
  return StatusWrite::kWritten;
}

kube::ReconcileResult TrainingJobReconciler::write_status(const json& job, json status,
                                                          kube::ReconcileResult then) {
  switch (put_status(job, status)) {
    case StatusWrite::kGone:
      return {};
    case StatusWrite::kConflict:
      return {.requeue = true};
    case StatusWrite::kWritten:
      break;
  }
  return then;
}

kube::ReconcileResult TrainingJobReconciler::write_final_status(const std::string& key,
                                                                const json& job, json status) {
  const kube::ReconcileResult result = write_status(job, std::move(status), {});
  // A conflict retries with the fold still there: let go first, and the retry would write the
  // progress of a fresh, empty registration (step 0) over the one the stages reported.
  if (!result.requeue) stages_.unregister_job(key);
  return result;
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

std::map<std::string, std::vector<json>> TrainingJobReconciler::pods_of(
    const std::string& uid) const {
  std::map<std::string, std::vector<json>> out;
  for (const std::shared_ptr<const MemberView>& member : members_.members()) {
    for (json& pod : member->pods_of_job(uid)) {
      if (kube::get_label(pod, kHubLabel) == options_.hub_id) {
        out[member->name].push_back(std::move(pod));
      }
    }
  }
  return out;
}

int TrainingJobReconciler::delete_remote_objects(const json& job, bool pods_only) {
  forget_attempt(kube::object_uid(job));
  return delete_labelled(kube::object_namespace(job),
                         remote_selector(options_.hub_id, kube::object_uid(job)), pods_only,
                         kube::object_key(job));
}

int TrainingJobReconciler::delete_labelled(const std::string& ns, const std::string& selector,
                                           bool pods_only, const std::string& job,
                                           const std::string& spare_attempt) {
  kube::ListOptions list;
  list.label_selector = selector;
  int remaining = 0;
  std::vector<std::string> kinds = {"Pod"};
  if (!pods_only) kinds.insert(kinds.end(), {"ConfigMap", "Secret"});
  for (const std::shared_ptr<const MemberView>& member : members_.members()) {
    for (const std::string& kind : kinds) {
      try {
        for (const json& o : member->client->list_all(resource(kind), ns, list).items) {
          if (kind == "Pod" && !spare_attempt.empty() &&
              kube::get_annotation(o, kAttemptAnnotation) == spare_attempt)
            continue;
          ++remaining;
          // A pod on a Node that is not Ready: no kubelet there finishes a graceful deletion,
          // so it is deleted at once (kubectl delete --force --grace-period=0).
          kube::DeleteOptions options;
          const std::string node =
              kind == "Pod" ? o.value("spec", json::object()).value("nodeName", "") : "";
          if (const auto seen = node.empty() ? nullptr : member->node(node);
              seen && !node_ready(*seen)) {
            options.grace_period_seconds = 0;
          }
          const json metadata = o.value("metadata", json::object());
          if (kube::is_being_deleted(o) &&
              (!options.grace_period_seconds ||
               metadata.value("deletionGracePeriodSeconds", int64_t{-1}) == 0))
            continue;
          try {
            member->client->remove(resource(kind), ns, kube::object_name(o), options);
            if (options.grace_period_seconds) {
              --remaining;
              logger_->info("force-deleted a stage pod on a node that is not Ready",
                            {{"job", job},
                             {"member", member->name},
                             {"pod", kube::object_name(o)},
                             {"node", node}});
            }
          } catch (const kube::ApiError& e) {
            if (e.code() != 404) throw;
            --remaining;
          }
        }
      } catch (const std::exception& e) {
        ++remaining;  // an unreachable member keeps the finalizer until it answers
        logger_->warning("could not delete a job's objects in a member cluster",
                         {{"job", job}, {"member", member->name}, {"error", e.what()}});
      }
    }
  }
  return remaining;
}

int TrainingJobReconciler::sweep_orphans(const std::string& key) {
  const auto slash = key.find('/');
  const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
  // Label values the key cannot give (a key of something else) select nothing worth deleting.
  if (slash == std::string::npos || !label_value_violation(ns).empty() ||
      !label_value_violation(name).empty()) {
    return 0;
  }
  const std::string selector = std::string(kHubLabel) + "=" + options_.hub_id + "," +
                               kJobNamespaceLabel + "=" + ns + "," + kJobNameLabel + "=" + name;
  return delete_labelled(ns, selector, /*pods_only=*/false, key);
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
