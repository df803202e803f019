// The TrainingJob reconciler when things go wrong or change: failed, timed-out and deleted
// pods restart the gang (with backoff, up to maxRestarts), suspend and resume, deletion and
// orphans swept in every member, and a job managed by another controller left alone.
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

// The same fixture, its own suite name.
class TrainingJobRestarts : public TrainingJobReconcilerTest {};

// 6. A failed pod: the gang goes, restarts counts it, placed again after the backoff; past
// maxRestarts the job fails.
TEST_F(TrainingJobRestarts, FailedPodRestartsTheGangThenFailsPastMaxRestarts) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  json manifest = job_manifest("flaky", 2, 2);
  manifest["spec"]["failurePolicy"]["backoffSeconds"] = 1;
  create_and_place(manifest);
  set_phase("Running");
  reconcile("flaky");
  ASSERT_EQ(phase(job("flaky")), "Running");
  const auto first = stages_.registration(key("flaky"));
  ASSERT_TRUE(first.has_value());

  set_phase("Failed", "flaky-s1-r0");
  reconcile("flaky");
  json current = job("flaky");
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_EQ(condition(current, "Running").value("reason", ""), "Restarting");
  EXPECT_NE(condition(current, "Running").value("message", "").find("flaky-s1-r0"),
            std::string::npos);
  EXPECT_TRUE(has_event("flaky", "Restarting"));
  EXPECT_EQ(condition(current, "Degraded").value("status", ""), "True");
  EXPECT_EQ(condition(current, "Degraded").value("reason", ""), "PodFailed");
  EXPECT_TRUE(has_event("flaky", "Degraded"));
  for (const json& pod : member_pods(0)) EXPECT_TRUE(kube::is_being_deleted(pod));
  for (const json& pod : member_pods(1)) EXPECT_TRUE(kube::is_being_deleted(pod));

  // While the old pods terminate, the job waits: no new attempt, no new restart.
  reconcile("flaky");
  current = job("flaky");
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_NE(phase(current), "Starting");

  finish_deletions();
  ASSERT_EQ(pod_count(), 0u);
  // Within the backoff nothing is placed; after it the gang comes back (attempt 1).
  const kube::ReconcileResult wait = reconcile("flaky");
  EXPECT_EQ(pod_count(), 0u);
  EXPECT_EQ(phase(job("flaky")), "Pending");
  EXPECT_GT(wait.requeue_after, kube::Clock::duration::zero());
  std::this_thread::sleep_for(wait.requeue_after);
  reconcile("flaky");
  current = job("flaky");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  ASSERT_EQ(pod_count(), 4u);
  for (int m = 0; m < 2; ++m)
    for (const json& pod : member_pods(m))
      EXPECT_EQ(kube::get_annotation(pod, kAttemptAnnotation), "1");
  // Attempt 1 has a stage job id of its own: processes of attempt 0 that could not be deleted
  // (an unreachable member) can neither rendezvous with it nor report into it.
  const auto second = stages_.registration(key("flaky"));
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(second->job_id, first->job_id);

  // maxRestarts is 1: the next failure fails the job.
  set_phase("Failed", "flaky-s0-r1");
  reconcile("flaky");
  current = job("flaky");
  EXPECT_EQ(phase(current), "Failed") << current["status"].dump();
  EXPECT_EQ(condition(current, "Failed").value("reason", ""), "BackoffLimitExceeded");
  EXPECT_EQ(condition(current, "Degraded").value("reason", ""), "PodFailed");
  EXPECT_TRUE(current["status"].contains("completionTime"));
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_FALSE(stages_.registration(key("flaky")).has_value());
  finish_deletions();
  EXPECT_EQ(pod_count(), 0u);
  reconcile("flaky");
  EXPECT_EQ(pod_count(), 0u) << "a Failed job is not placed again";
}

// A rank's failure reported to the stage service restarts the gang; the next attempt starts
// with a fresh registration, not failed again by what the last one reported.
TEST_F(TrainingJobRestarts, FailureReportedByAStageRestartsTheGangOnce) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("oops", 2, 2));
  set_phase("Running");
  JobProgress progress;
  progress.world_size = 4;
  progress.started = 4;
  progress.failures = {"rank 3 (stage 1 replica 1): CUDA error: an illegal memory access"};
  stages_.set_progress(key("oops"), progress);
  reconcile("oops");
  json current = job("oops");
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_NE(condition(current, "Running").value("message", "").find("illegal memory access"),
            std::string::npos);
  EXPECT_EQ(condition(current, "Degraded").value("reason", ""), "StageFailed");
  EXPECT_FALSE(stages_.registration(key("oops")).has_value());
  finish_deletions();
  reconcile("oops");  // backoffSeconds 0
  ASSERT_EQ(pod_count(), 4u);
  EXPECT_TRUE(stages_.registration(key("oops")).has_value());
  reconcile("oops");
  current = job("oops");
  EXPECT_EQ(current["status"]["restarts"], 1) << current["status"].dump();
  EXPECT_EQ(phase(current), "Starting");
}

// 7. Pods not Running within startTimeoutSeconds: the gang is torn down and restarted, each
// time after backoffSeconds (a restart right after a restart waits too).
TEST_F(TrainingJobRestarts, StartTimeoutRestartsTheGangAfterTheBackoffEachTime) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  json manifest = job_manifest("slow", 2, 2);
  manifest["spec"]["failurePolicy"]["startTimeoutSeconds"] = 1;
  manifest["spec"]["failurePolicy"]["backoffSeconds"] = 1;
  manifest["spec"]["failurePolicy"]["maxRestarts"] = 2;
  create_and_place(manifest);
  for (int restart = 1; restart <= 2; ++restart) {
    ASSERT_EQ(pod_count(), 4u);
    // Times have whole seconds: wait until a full timeout has surely passed.
    std::this_thread::sleep_for(2100ms);
    reconcile("slow");
    const json current = job("slow");
    EXPECT_EQ(current["status"]["restarts"], restart) << current["status"].dump();
    EXPECT_NE(condition(current, "Running").value("message", "").find("startTimeoutSeconds"),
              std::string::npos);
    EXPECT_EQ(condition(current, "Degraded").value("reason", ""), "StartTimeout");
    for (int m = 0; m < 2; ++m)
      for (const json& pod : member_pods(m)) EXPECT_TRUE(kube::is_being_deleted(pod));
    finish_deletions();
    const kube::ReconcileResult wait = reconcile("slow");
    EXPECT_EQ(pod_count(), 0u) << "restart " << restart << " did not wait for the backoff";
    EXPECT_GT(wait.requeue_after, kube::Clock::duration::zero());
    std::this_thread::sleep_for(wait.requeue_after);
    reconcile("slow");
    EXPECT_EQ(phase(job("slow")), "Starting");
  }
  EXPECT_EQ(pod_count(), 4u);
}

// A stage pod deleted under a running job (by a person, or a drained node) fails the attempt.
TEST_F(TrainingJobRestarts, PodDeletedUnderARunningJobRestartsIt) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("gone", 2, 2));
  set_phase("Running");
  reconcile("gone");
  ASSERT_EQ(phase(job("gone")), "Running");
  members_[1]->admin().remove(core("pods"), ns_, "gone-s1-r1");
  reconcile("gone");
  const json current = job("gone");
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_NE(condition(current, "Running").value("message", "").find("gone-s1-r1"),
            std::string::npos)
      << condition(current, "Running").dump();
  EXPECT_EQ(condition(current, "Degraded").value("reason", ""), "PodsGone");
  EXPECT_EQ(pod_count(), 4u) << "the rest of the gang is terminating";
  for (int m = 0; m < 2; ++m)
    for (const json& pod : member_pods(m)) EXPECT_TRUE(kube::is_being_deleted(pod));
  finish_deletions();
  reconcile("gone");  // backoffSeconds 0
  EXPECT_EQ(phase(job("gone")), "Starting");
  EXPECT_EQ(pod_count(), 4u);
}

// 8. suspend: the pods go and the job says Suspended; resumed: placed again.
TEST_F(TrainingJobRestarts, SuspendDeletesThePodsAndResumePlacesAgain) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("nap", 2, 2));
  set_phase("Running");
  reconcile("nap");
  hub_->admin().patch(jobs_, ns_, "nap", kube::PatchType::kMerge, {{"spec", {{"suspend", true}}}});
  reconcile("nap");
  json current = job("nap");
  EXPECT_EQ(phase(current), "Suspended");
  for (int m = 0; m < 2; ++m)
    for (const json& pod : member_pods(m)) EXPECT_TRUE(kube::is_being_deleted(pod));
  finish_deletions();
  reconcile("nap");
  current = job("nap");
  EXPECT_EQ(phase(current), "Suspended");
  EXPECT_EQ(condition(current, "Suspended").value("reason", ""), "Suspended");
  EXPECT_TRUE(has_event("nap", "Suspended"));
  EXPECT_EQ(pod_count(), 0u);
  EXPECT_FALSE(stages_.registration(key("nap")).has_value());

  hub_->admin().patch(jobs_, ns_, "nap", kube::PatchType::kMerge, {{"spec", {{"suspend", false}}}});
  reconcile("nap");
  current = job("nap");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(condition(current, "Suspended").value("status", ""), "False");
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_EQ(current["status"].value("restarts", 0), 0) << "a suspension is not a restart";
}

// 9. Deleting the job deletes its objects in every member, then lets it go.
TEST_F(TrainingJobRestarts, DeletionSweepsEveryMemberThenDropsTheFinalizer) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("bye", 2, 2));
  const json placed = job("bye");
  hub_->admin().remove(jobs_, ns_, "bye");
  reconcile("bye");
  EXPECT_TRUE(kube::has_finalizer(job("bye"), kCleanupFinalizer))
      << "kept while pods terminate in the members";
  finish_deletions();
  reconcile("bye");
  EXPECT_TRUE(eventually([&] {
    try {
      job("bye");
      return false;
    } catch (const kube::ApiError& e) {
      return e.code() == 404;
    }
  })) << "the job is still in the hub";
  for (int m = 0; m < 2; ++m) {
    EXPECT_TRUE(remote(m, "pods", placed).empty()) << kMembers[m];
    EXPECT_TRUE(remote(m, "configmaps", placed).empty()) << kMembers[m];
    EXPECT_TRUE(remote(m, "secrets", placed).empty()) << kMembers[m];
  }
  EXPECT_FALSE(stages_.registration(key("bye")).has_value());
  sync_job("bye");
  reconciler_->reconcile(key("bye"));  // gone: nothing to do, nothing thrown
}

// A job gone without the operator's finalizer (removed by hand, or deleted while the operator
// was down): a reconcile of its key deletes what it left in the members.
TEST_F(TrainingJobRestarts, OrphansOfAJobGoneWithoutItsFinalizerAreSwept) {
  add_node(0, "a1", 3);
  add_node(1, "b1", 3);
  create_and_place(job_manifest("lost", 2, 2));
  create_and_place(job_manifest("kept", 2, 1));
  const json lost = job("lost");
  ASSERT_EQ(remote(0, "pods", lost).size() + remote(1, "pods", lost).size(), 4u);
  hub_->admin().patch(jobs_, ns_, "lost", kube::PatchType::kMerge,
                      {{"metadata", {{"finalizers", nullptr}}}});
  hub_->admin().remove(jobs_, ns_, "lost");
  sync_job("lost");
  reconciler_->reconcile(key("lost"));
  for (int m = 0; m < 2; ++m) {
    for (const json& pod : remote(m, "pods", lost)) EXPECT_TRUE(kube::is_being_deleted(pod));
    EXPECT_TRUE(remote(m, "configmaps", lost).empty()) << kMembers[m];
    EXPECT_TRUE(remote(m, "secrets", lost).empty()) << kMembers[m];
  }
  // Another job's objects are not touched.
  const json kept = job("kept");
  size_t kept_pods = 0;
  for (int m = 0; m < 2; ++m) {
    for (const json& pod : remote(m, "pods", kept)) {
      EXPECT_FALSE(kube::is_being_deleted(pod));
      ++kept_pods;
    }
  }
  EXPECT_EQ(kept_pods, 2u);
}

// 10. A job another controller manages is left alone.
TEST_F(TrainingJobRestarts, JobManagedByAnotherControllerIsLeftAlone) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  json manifest = job_manifest("theirs", 2, 2);
  manifest["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue";
  const json created = create_job(manifest);
  reconcile("theirs");
  reconcile("theirs");
  const json current = job("theirs");
  EXPECT_EQ(kube::object_resource_version(current), kube::object_resource_version(created));
  EXPECT_FALSE(kube::has_finalizer(current, kCleanupFinalizer));
  EXPECT_FALSE(current.contains("status") && current["status"].contains("phase"));
  EXPECT_EQ(pod_count(), 0u);
  EXPECT_TRUE(events("theirs").empty());
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
