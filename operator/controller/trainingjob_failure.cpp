#include "kube/api_error.h"
#include "kube/object.h"
#include "operator/controller/conditions.h"
#include "operator/controller/labels.h"
#include "operator/controller/trainingjob_reconciler.h"
#include "operator/controller/trainingjob_reconciler_internal.h"

namespace tessel::controller {

using nlohmann::json;
using namespace trainingjob;

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

std::vector<std::string> TrainingJobReconciler::members_not_listed() const {
  std::vector<std::string> out;
  for (const std::shared_ptr<const MemberView>& member : members_.members()) {
    if (member->first_list_pending) out.push_back(member->name);
  }
  return out;
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

}  // namespace tessel::controller
