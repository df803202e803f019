#include "kube/api_error.h"
#include "kube/object.h"
#include "operator/controller/conditions.h"
#include "operator/controller/labels.h"
#include "operator/controller/pod_builder.h"
#include "operator/controller/trainingjob_reconciler.h"
#include "operator/controller/trainingjob_reconciler_internal.h"

namespace tessel::controller {

using nlohmann::json;
using namespace trainingjob;

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

}  // namespace tessel::controller
