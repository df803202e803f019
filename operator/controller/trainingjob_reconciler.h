// The TrainingJob reconciler: a level-triggered function from what the hub and the member
// clusters hold to the actions that bring a job one step closer to its spec.
//
//   gone                      -> forget it; delete what is left of it in the members (orphans
//                                of a finalizer removed by hand, or of a job deleted while the
//                                operator was down: a pod of it queues its key)
//   managed by another        -> nothing (spec.managedBy: Kueue and the like gate it)
//   being deleted             -> delete its objects in every member; drop the finalizer once
//                                none is left
//   invalid                   -> Valid=False naming every field at fault (the webhook was
//                                bypassed)
//   suspended                 -> delete its pods (the stages checkpoint on SIGTERM); Suspended
//   no pods                   -> choose GPUs, place, create Secret + ConfigMap + pods in each
//                                member, all or none (an elastic job at the widest width that
//                                fits); or Pending with the reason
//   pods terminating, or left -> wait until they are gone (they hold GPUs, and the next attempt's
//   by an earlier attempt        pods take their names); one of the current attempt deleted
//                                under a Starting or Running job fails that attempt
//   pods, not all Running     -> Starting; after startTimeoutSeconds or on a failed pod (or a
//                                failure a stage reported, or a stage pod's Node not Ready),
//                                Degraded with the reason, delete them all (those on a lost
//                                Node with gracePeriodSeconds 0), exclude the node at fault from
//                                the next placements while the job fits without it, and start
//                                again after backoffSeconds (at most maxRestarts times, then
//                                Failed); a re-placement keeps the layer split
//   all Running               -> Running (Degraded False, Recovered, after a failure); the stage
//                                service's progress folded into status at most once per status
//                                interval; an elastic job narrower than its spec grows back
//                                (a resize, not a restart) once its full width fits
//   a member not answering    -> MembersReachable False; its pods, last seen Running, left
//                                training; a new attempt goes elsewhere, and the old pods there
//                                are deleted when it answers
//   all Succeeded, or every   -> Succeeded, terminal as Failed is: neither is ever left again
//   rank reported its last       (a restart decision is written before its teardown, so one made
//   step                         on a stale cache conflicts; a finished job's stray pods are
//                                deleted)
//
// Its definitions, one job per file: trainingjob_reconciler.cpp (reconcile, finalize, the token),
// trainingjob_start.cpp (placing an attempt and creating its objects; assumed pods),
// trainingjob_failure.cpp (failing an attempt, lost nodes, member reachability),
// trainingjob_grow.cpp (elastic regrowth), trainingjob_status_write.cpp (status writes, Succeeded),
// trainingjob_member_objects.cpp (the job's objects in the members: found, deleted, orphans and
// strays swept); trainingjob_reconciler_internal.h holds the helpers they share.
//
// Everything it remembers between reconciles (tokens, GPUs just assigned, when status was last
// written) is rebuilt from the API after a restart: the token from the hub Secret owned by the
// job, the assignment from the pods, the placement from status.placement.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/trainingjob.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/log.h"
#include "kube/object_store.h"
#include "operator/controller/gang.h"
#include "operator/controller/job_placement.h"
#include "operator/controller/job_progress.h"
#include "operator/controller/member_registry.h"

namespace tessel::controller {

inline constexpr const char* kCleanupFinalizer = "tessel.dev/cleanup";
inline constexpr const char* kOperatorManager = "tessel.dev/operator";  // spec.managedBy

struct TrainingJobReconcilerOptions {
  std::string hub_id = "hub";
  std::string stage_image = "tessel/stage:0.1.0";
  // Relative spec.data.text.path values resolve against it (the stage image's examples/).
  std::string data_root = "/usr/share/tessel/examples/trainingjobs";
  std::string stage_service_address;  // host:port the stage pods dial
  std::string ca_pem;                 // verifies the stage service; handed to the pods
  std::chrono::milliseconds status_interval{2000};             // between progress writes of one job
  std::chrono::milliseconds pending_recheck{15000};            // a job waiting for GPUs looks again
  std::function<std::chrono::system_clock::time_point()> now;  // empty: the system clock
  std::shared_ptr<const kube::Logger> logger;  // nullptr: component "trainingjob-controller"
  // Observers for metrics; may be empty.
  std::function<void(bool placed, double seconds)> on_placement;
  std::function<void(const std::string& key, const JobProgress* progress)> on_progress;
};

class TrainingJobReconciler {
 public:
  // Everything passed must outlive the reconciler. `jobs` is the hub informer's store.
  TrainingJobReconciler(kube::Client& hub, kube::ResourceInfo jobs_resource,
                        const kube::ObjectStore& jobs, MemberRegistry& members,
                        StageChannel& stages, kube::EventRecorder& events,
                        TrainingJobReconcilerOptions options);

  kube::ReconcileResult reconcile(const std::string& key);

  // Jobs that wait for GPUs: a change of nodes or pods in a member may let them start.
  std::vector<std::string> waiting_jobs() const;

  // A member's informer showed one of this hub's pods (added, changed or deleted): an assumed pod
  // of that name is no longer needed to hold its GPUs (the cache, or its absence, now says).
  void pod_observed(const std::string& cluster, const nlohmann::json& pod);

  // Stops a placement search in progress (leadership lost).
  void cancel() { cancel_.store(true); }

 private:
  kube::ReconcileResult finalize(const nlohmann::json& job);
  kube::ReconcileResult start(const api::TrainingJob& job, nlohmann::json& status);
  // What failed an attempt: the Degraded reason (PodFailed, NodeNotReady, PodsGone,
  // StageFailed, StartTimeout), the message naming the pod/node/cluster, and the nodes to leave
  // out of the next placement (status.excludedNodes).
  struct Failure {
    std::string reason;
    std::string message;
    std::vector<NodeRef> nodes;
  };
  kube::ReconcileResult fail_attempt(const api::TrainingJob& job, nlohmann::json& status,
                                     const Failure& failure);
  // status.excludedNodes plus `nodes` (each once, newest last, at most kMaxExcludedNodes), each
  // for kExcludedNodeTtl, with `reason`.
  void exclude_nodes(nlohmann::json& status, const std::vector<NodeRef>& nodes,
                     const std::string& reason);
  // Succeeded, with the final progress (final_progress_status, `finished` from the pods'
  // termination messages); `ranks` for the message.
  kube::ReconcileResult succeed(const api::TrainingJob& job, nlohmann::json& status,
                                const std::optional<JobProgress>& progress,
                                const std::optional<FinalFigures>& finished, int ranks);
  // A job whose attempt failed (Degraded True, for another reason than NodeNotReady) and was not
  // replaced yet: when a node of that attempt's placement is not Ready now, the node is the
  // cause. The reason becomes NodeNotReady naming it (the first reason kept in the message) and
  // the node is excluded. A peer's link failure reaches the stage service before the Node's
  // NotReady comes through its member's API server, so the restart goes ahead at once on what
  // was seen first, and the reason is amended while the next attempt is not placed yet.
  void blame_lost_node(const api::TrainingJob& job, nlohmann::json& status);
  // Deletes the pods of a finished job (Succeeded or Failed) that are not its last attempt's
  // finished pods, were any made from a stale view.
  void remove_strays(const nlohmann::json& job, const nlohmann::json& status);
  // A narrower job whose full width fits the free GPUs again (its own count as free): tears its
  // pods down (each stage checkpoints on SIGTERM) so that start() places it at full width; a
  // resize, not a restart. nullopt when it stays as it is.
  std::optional<kube::ReconcileResult> grow(const api::TrainingJob& job, nlohmann::json& status);
  // MembersReachable of the clusters the attempt's tasklets are in; an Event on each flip.
  void note_member_reachability(const api::TrainingJob& job, nlohmann::json& status,
                                const std::vector<TaskletPlace>& tasklets);
  // The Nodes of the job's pods whose Ready condition is not True (or that are gone), each with
  // what its Ready condition says.
  std::map<NodeRef, std::string> lost_nodes(
      const std::map<std::string, std::vector<nlohmann::json>>& pods) const;
  // The members whose informers have failed for a while (MemberView::reachable False).
  std::set<std::string> unreachable_members() const;
  // The members whose caches have not listed yet (MemberView::first_list_pending).
  std::vector<std::string> members_not_listed() const;
  // The status that ends the job's reporting (Succeeded, or Suspended with its pods gone), then
  // its progress let go, once written.
  kube::ReconcileResult write_final_status(const std::string& key, const nlohmann::json& job,
                                           nlohmann::json status);
  kube::ReconcileResult write_status(const nlohmann::json& job, nlohmann::json status,
                                     kube::ReconcileResult then);
  // One status write, with the resourceVersion of `job` (the one a decision was made on).
  enum class StatusWrite { kWritten, kConflict, kGone };
  StatusWrite put_status(const nlohmann::json& job, const nlohmann::json& status);

  std::vector<GpuNode> candidates(const api::TrainingJob& job, std::vector<std::string>& notes);
  std::map<std::string, std::vector<nlohmann::json>> pods_of(const std::string& uid) const;
  // Deletes every object of the job in every member; the number still there.
  int delete_remote_objects(const nlohmann::json& job, bool pods_only);
  // Deletes the objects `selector` selects in namespace `ns` of every member (job: for logs);
  // the number still there (being deleted, or in a member that did not answer).
  // Pods whose kAttemptAnnotation is spare_attempt (when not empty) are left alone. A pod bound
  // to a Node that is not Ready is deleted with gracePeriodSeconds 0 (no kubelet will finish a
  // graceful deletion there), even when a graceful deletion is under way.
  int delete_labelled(const std::string& ns, const std::string& selector, bool pods_only,
                      const std::string& job, const std::string& spare_attempt = "");
  // Deletes what this hub made in the members for a job `key` ("namespace/name") that is gone.
  int sweep_orphans(const std::string& key);
  std::string token_for(const nlohmann::json& job);
  void remember_assumed(const std::string& cluster, const std::vector<nlohmann::json>& pods);
  // The job's pods are being deleted: its assumed pods and its placement record are let go.
  void forget_attempt(const std::string& uid);
  bool has_assumed(const std::string& uid) const;
  std::string now_text() const;
  std::chrono::system_clock::time_point now() const;
  void record(const nlohmann::json& job, kube::EventType type, const std::string& reason,
              const std::string& message);

  kube::Client& hub_;
  const kube::ResourceInfo jobs_resource_;
  const kube::ObjectStore& jobs_;
  MemberRegistry& members_;
  StageChannel& stages_;
  kube::EventRecorder& events_;
  const TrainingJobReconcilerOptions options_;
  const std::shared_ptr<const kube::Logger> logger_;
  std::atomic<bool> cancel_{false};

  mutable std::mutex mutex_;                   // guards the maps below
  std::map<std::string, std::string> tokens_;  // job uid -> token
  // Pods created but not yet seen in a member's cache, by cluster (the scheduler's "assumed"
  // pods): they hold their GPUs for the next placement until the cache shows them, or for
  // 60 s (kAssumedPodTtl: a pod deleted before the cache saw it is never seen).
  struct AssumedPod {
    nlohmann::json pod;
    std::chrono::steady_clock::time_point created;
  };
  std::map<std::string, std::vector<AssumedPod>> assumed_;
  // The tasklets of each job's current start attempt (by uid) from when its pods were created
  // until its pods go: a reconcile that reads the job from a cache that does not show the status
  // with them yet still knows them, instead of taking the new pods for strays. Rebuilt after a
  // restart from status.placement, which the cache then holds.
  std::map<std::string, std::vector<TaskletPlace>> placed_;
  std::map<std::string, std::chrono::steady_clock::time_point> progress_written_;
  std::set<std::string> waiting_;  // jobs Pending for GPUs
  // When each narrower-than-spec job last looked whether its full width fits (pending_recheck).
  std::map<std::string, std::chrono::steady_clock::time_point> grow_checked_;
  std::mutex placing_;  // one placement at a time: two jobs never get the same GPU
};

}  // namespace tessel::controller
