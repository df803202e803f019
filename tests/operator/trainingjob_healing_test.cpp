// The TrainingJob reconciler healing a job (issue 14): a node that goes NotReady under it (its
// pods force-deleted, Degraded, the next placement without it), a failed pod's node left out
// while the job fits elsewhere, a member that stops answering (the job keeps running, no
// duplicates once it answers again), and elastic width (shrink when GPUs are short, regrow when
// they return, the global batch and the layer split kept, no restart counted).
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

class TrainingJobHealing : public TrainingJobReconcilerTest {
 protected:
  std::set<std::string> nodes_of_pods(int m) const {
    std::set<std::string> out;
    for (const json& pod : member_pods(m)) out.insert(pod["spec"].value("nodeName", ""));
    return out;
  }

  static json status_of(const json& job_object) {
    return job_object.value("status", json::object());
  }

  // Each stage's layers in status.placement.
  static std::vector<int> layers(const json& job_object) {
    std::vector<int> out;
    for (const json& stage : status_of(job_object)["placement"]["stages"])
      out.push_back(stage["layers"].get<int>());
    return out;
  }
};

// A node that goes NotReady under a running job: its pods can never finish a graceful deletion,
// so they are deleted at once; the job is Degraded (NodeNotReady, naming the node), restarts,
// and the next placement leaves the node out; Recovered once the new attempt runs.
TEST_F(TrainingJobHealing, NotReadyNodeForceDeletesItsPodsAndIsLeftOut) {
  add_node(0, "a1", 2);
  const std::string b1 = add_node(1, "b1", 2);
  const std::string b2 = add_node(1, "b2", 2);
  create_and_place(job_manifest("lost", 2, 2));
  ASSERT_EQ(nodes_of_pods(1), (std::set<std::string>{b1, b2})) << "member-b has the most GPUs";
  set_phase("Running");
  reconcile("lost");
  ASSERT_EQ(phase(job("lost")), "Running");

  lose_node(1, b1);
  reconcile("lost");
  json current = job("lost");
  EXPECT_EQ(status_of(current)["restarts"], 1);
  const json degraded = condition(current, "Degraded");
  EXPECT_EQ(degraded.value("status", ""), "True") << current["status"].dump();
  EXPECT_EQ(degraded.value("reason", ""), "NodeNotReady");
  EXPECT_NE(degraded.value("message", "").find("member-b/" + b1), std::string::npos)
      << degraded.dump();
  EXPECT_NE(degraded.value("message", "").find("NodeStatusUnknown"), std::string::npos);
  EXPECT_TRUE(has_event("lost", "Degraded"));
  // The pods on the lost node are gone already (gracePeriodSeconds 0); the others terminate.
  for (const json& pod : member_pods(1)) {
    EXPECT_NE(pod["spec"].value("nodeName", ""), b1) << kube::object_name(pod);
    EXPECT_TRUE(kube::is_being_deleted(pod));
  }
  ASSERT_EQ(status_of(current)["excludedNodes"].size(), 1u);
  EXPECT_EQ(status_of(current)["excludedNodes"][0]["cluster"], "member-b");
  EXPECT_EQ(status_of(current)["excludedNodes"][0]["node"], b1);
  EXPECT_EQ(status_of(current)["excludedNodes"][0]["reason"], "NodeNotReady");

  finish_deletions();
  reconcile("lost");  // backoffSeconds 0
  current = job("lost");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  ASSERT_EQ(pod_count(), 4u);
  EXPECT_FALSE(nodes_of_pods(1).contains(b1));
  EXPECT_EQ(nodes_of_pods(0).size(), 1u);
  EXPECT_EQ(condition(current, "Degraded").value("status", ""), "True") << "not running yet";

  set_phase("Running");
  reconcile("lost");
  current = job("lost");
  EXPECT_EQ(phase(current), "Running");
  EXPECT_EQ(condition(current, "Degraded").value("status", ""), "False");
  EXPECT_EQ(condition(current, "Degraded").value("reason", ""), "Recovered");
  EXPECT_TRUE(has_event("lost", "Recovered"));
  EXPECT_EQ(status_of(current)["restarts"], 1);
}

// A lost node's peers report their links to it failed before the Node's NotReady comes through
// its member's API server: the restart goes ahead on the stage failure, and once the node shows
// NotReady (before the next attempt is placed) the reason is the node, named, and it is excluded.
TEST_F(TrainingJobHealing, AStageFailureThenItsNodeNotReadyIsBlamedOnTheNode) {
  add_node(0, "a1", 2);
  const std::string b1 = add_node(1, "b1", 2);
  const std::string b2 = add_node(1, "b2", 2);
  create_and_place(job_manifest("blame", 2, 2));
  ASSERT_EQ(nodes_of_pods(1), (std::set<std::string>{b1, b2}));
  set_phase("Running");
  reconcile("blame");
  JobProgress progress;
  progress.world_size = 4;
  progress.started = 4;
  progress.failures = {"rank 2 (stage 0 replica 1): transport: the link to rank 0 failed"};
  stages_.set_progress(key("blame"), progress);
  reconcile("blame");
  json current = job("blame");
  ASSERT_EQ(condition(current, "Degraded").value("reason", ""), "StageFailed");
  EXPECT_EQ(status_of(current)["restarts"], 1);

  lose_node(1, b1);
  reconcile("blame");
  current = job("blame");
  const json degraded = condition(current, "Degraded");
  EXPECT_EQ(degraded.value("status", ""), "True");
  EXPECT_EQ(degraded.value("reason", ""), "NodeNotReady") << degraded.dump();
  const std::string message = degraded.value("message", "");
  EXPECT_NE(message.find("member-b/" + b1), std::string::npos) << message;
  EXPECT_NE(message.find("NodeStatusUnknown"), std::string::npos) << message;
  EXPECT_NE(message.find("StageFailed: rank 2"), std::string::npos) << message;
  ASSERT_EQ(status_of(current)["excludedNodes"].size(), 1u) << current["status"].dump();
  EXPECT_EQ(status_of(current)["excludedNodes"][0]["node"], b1);
  EXPECT_EQ(status_of(current)["excludedNodes"][0]["reason"], "NodeNotReady");
  EXPECT_EQ(status_of(current)["restarts"], 1) << "amended, not restarted again";

  finish_deletions();
  reconcile("blame");
  current = job("blame");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_FALSE(nodes_of_pods(1).contains(b1));
  EXPECT_EQ(condition(current, "Degraded").value("reason", ""), "NodeNotReady");
  EXPECT_EQ(status_of(current)["restarts"], 1);
}

// A failed pod's node is left out of the next placement while the job fits elsewhere; when it
// does not fit without the excluded nodes, they are used and the Placed message says so. The
// layer split stays the one the first placement chose.
TEST_F(TrainingJobHealing, FailedPodsNodeIsExcludedWhileTheJobFitsElsewhere) {
  const std::string a1 = add_node(0, "a1", 4);
  const std::string b1 = add_node(1, "b1", 4);
  json manifest = job_manifest("flaky", 2, 2);
  manifest["spec"]["failurePolicy"]["maxRestarts"] = 3;
  create_and_place(manifest);
  ASSERT_EQ(member_pods(0).size(), 4u) << "ties go to the first member by name";
  const std::vector<int> first_split = layers(job("flaky"));
  set_phase("Running");
  reconcile("flaky");

  set_phase("Failed", "flaky-s1-r0");
  reconcile("flaky");
  json current = job("flaky");
  EXPECT_EQ(condition(current, "Degraded").value("reason", ""), "PodFailed");
  EXPECT_NE(condition(current, "Degraded").value("message", "").find("flaky-s1-r0"),
            std::string::npos);
  ASSERT_EQ(status_of(current)["excludedNodes"].size(), 1u);
  EXPECT_EQ(status_of(current)["excludedNodes"][0]["node"], a1);
  EXPECT_EQ(status_of(current)["excludedNodes"][0]["reason"], "PodFailed");
  EXPECT_TRUE(status_of(current)["excludedNodes"][0].contains("expiresAt"));
  finish_deletions();
  reconcile("flaky");
  current = job("flaky");
  ASSERT_EQ(phase(current), "Starting");
  EXPECT_TRUE(member_pods(0).empty());
  EXPECT_EQ(member_pods(1).size(), 4u) << "placed without " << a1;
  EXPECT_EQ(condition(current, "Placed").value("message", "").find("excluded after a failure"),
            std::string::npos);
  EXPECT_EQ(layers(current), first_split);

  set_phase("Running");
  reconcile("flaky");
  set_phase("Failed", "flaky-s0-r1");
  reconcile("flaky");
  current = job("flaky");
  EXPECT_EQ(status_of(current)["excludedNodes"].size(), 2u);
  finish_deletions();
  reconcile("flaky");
  current = job("flaky");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(pod_count(), 4u) << "both nodes are excluded and the job fits on neither without them";
  EXPECT_NE(condition(current, "Placed").value("message", "").find("excluded after a failure"),
            std::string::npos)
      << condition(current, "Placed").dump();
  EXPECT_EQ(layers(current), first_split);
  EXPECT_EQ(status_of(current)["restarts"], 2);
}

// A member that stops answering while the job runs: no teardown (its pods keep training and
// report to the stage service directly), MembersReachable False naming it, one Event. A failure
// the stages report meanwhile restarts the job in the members that answer; the old pods in the
// silent member are deleted once it answers again, and no stage runs twice.
TEST_F(TrainingJobHealing, UnreachableMemberKeepsTrainingAndLeavesNoDuplicates) {
  if (!members_[1]->server()) GTEST_SKIP() << "needs a test server to silence member-b";
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("far", 2, 2));
  ASSERT_EQ(member_pods(0).size(), 2u);
  ASSERT_EQ(member_pods(1).size(), 2u);
  set_phase("Running");
  reconcile("far");
  ASSERT_EQ(phase(job("far")), "Running");
  add_node(0, "a2", 4);  // room for the whole job in member-a, for the restart below
  JobProgress progress;
  progress.world_size = 4;
  progress.started = 4;
  progress.step = 5;
  stages_.set_progress(key("far"), progress);

  testing::ApiTestServer* silent = members_[1]->server();
  silent->set_authorizer([](const testing::RequestAttributes&) { return false; });
  silent->drop_watches();
  const auto away = [&] {
    const auto view = registry_->member(kMembers[1]);
    return view && view->reachable.status == "False";
  };
  ASSERT_TRUE(eventually(away, 60s)) << "member-b never became unreachable";
  sync_job("far");
  reconciler_->reconcile(key("far"));
  json current = job("far");
  EXPECT_EQ(phase(current), "Running") << current["status"].dump();
  EXPECT_EQ(status_of(current).value("restarts", 0), 0);
  const json reachable = condition(current, "MembersReachable");
  EXPECT_EQ(reachable.value("status", ""), "False");
  EXPECT_EQ(reachable.value("reason", ""), "MemberUnreachable");
  EXPECT_NE(reachable.value("message", "").find("member-b"), std::string::npos);
  EXPECT_TRUE(has_event("far", "MemberUnreachable"));
  for (const json& pod : member_pods(0)) EXPECT_FALSE(kube::is_being_deleted(pod));

  // A stage reports a failure: the attempt fails; member-b's pods cannot be deleted yet.
  progress.failures = {"rank 1 (stage 1 replica 0): lost its peer"};
  stages_.set_progress(key("far"), progress);
  sync_job("far");
  reconciler_->reconcile(key("far"));
  EXPECT_EQ(status_of(job("far"))["restarts"], 1);
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  for (const json& pod : member_pods(0))
    members_[0]->admin().remove(core("pods"), ns_, kube::object_name(pod), now);
  ASSERT_TRUE(eventually([&] {
    return registry_->member(kMembers[0])->pods_of_job(kube::object_uid(job("far"))).empty();
  }));
  sync_job("far");
  reconciler_->reconcile(key("far"));  // member-b's last known pods do not hold it up
  current = job("far");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  ASSERT_EQ(member_pods(0).size(), 4u) << "the new attempt, all in the member that answers";

  silent->set_authorizer(nullptr);
  ASSERT_TRUE(eventually([&] { return !away(); }, 90s)) << "member-b never answered again";
  reconcile("far");  // the earlier attempt's pods in member-b are deleted; the new ones stay
  finish_deletions();
  reconcile("far");
  EXPECT_TRUE(member_pods(1).empty());
  std::set<std::string> names;
  for (const json& pod : member_pods(0)) {
    EXPECT_FALSE(kube::is_being_deleted(pod)) << kube::object_name(pod);
    EXPECT_EQ(kube::get_annotation(pod, kAttemptAnnotation), "1");
    EXPECT_TRUE(names.insert(kube::object_name(pod)).second) << "twice: " << kube::object_name(pod);
  }
  EXPECT_EQ(names.size(), 4u);
  current = job("far");
  EXPECT_EQ(status_of(current)["restarts"], 1);
  EXPECT_EQ(condition(current, "MembersReachable").value("status", ""), "True");
}

// Elastic width: with GPUs for one replica only, the job runs narrower with the same global
// batch (more micro-batches per replica); once the GPUs of the full width are free it grows
// back, from the checkpoint the stages write as they stop, as a resize, not a restart.
TEST_F(TrainingJobHealing, ElasticJobShrinksWhenGpusAreShortAndGrowsBack) {
  add_node(0, "a1", 2);
  json manifest = job_manifest("stretch", 2, 2);  // global batch 8, micro-batch 2
  manifest["spec"]["elastic"] = {{"minReplicas", 1}};
  create_and_place(manifest);
  json current = job("stretch");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(status_of(current)["replicas"], 1);
  EXPECT_EQ(pod_count(), 2u);
  const json narrow = condition(current, "FullWidth");
  EXPECT_EQ(narrow.value("status", ""), "False");
  EXPECT_EQ(narrow.value("reason", ""), "Shrunk");
  EXPECT_NE(narrow.value("message", "").find("4 micro-batches per replica instead of 2"),
            std::string::npos)
      << narrow.dump();
  EXPECT_TRUE(has_event("stretch", "Shrunk"));
  const std::vector<json> maps = remote(0, "configmaps", current);
  ASSERT_EQ(maps.size(), 1u);
  const json file = json::parse(maps[0]["data"]["job.json"].get<std::string>());
  EXPECT_EQ(file["pipeline"]["replicas"], 1);
  EXPECT_EQ(file["workload"]["training"]["global_batch"], 8);
  EXPECT_EQ(file["ranks"].size(), 2u);
  const std::vector<int> split = layers(current);
  set_phase("Running");
  reconcile("stretch");
  ASSERT_EQ(phase(job("stretch")), "Running");

  add_node(1, "b1", 2);
  make_reconciler();  // a fresh reconciler looks at once (then every pending_recheck)
  reconcile("stretch");
  current = job("stretch");
  EXPECT_TRUE(has_event("stretch", "Growing"));
  EXPECT_EQ(status_of(current)["resizes"], 1);
  EXPECT_EQ(status_of(current).value("restarts", 0), 0) << "a resize is not a restart";
  EXPECT_EQ(condition(current, "FullWidth").value("reason", ""), "Growing");
  for (int m = 0; m < 2; ++m)
    for (const json& pod : member_pods(m)) EXPECT_TRUE(kube::is_being_deleted(pod));
  finish_deletions();
  reconcile("stretch");
  current = job("stretch");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(status_of(current)["replicas"], 2);
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_EQ(condition(current, "FullWidth").value("status", ""), "True");
  EXPECT_EQ(layers(current), split);
  for (int m = 0; m < 2; ++m) {
    for (const json& pod : member_pods(m))
      EXPECT_EQ(kube::get_annotation(pod, kAttemptAnnotation), "1");
    for (const json& map : remote(m, "configmaps", current)) {
      const json wide = json::parse(map["data"]["job.json"].get<std::string>());
      EXPECT_EQ(wide["pipeline"]["replicas"], 2);
      EXPECT_EQ(wide["workload"]["training"]["global_batch"], 8);
    }
  }
  set_phase("Running");
  reconcile("stretch");
  current = job("stretch");
  EXPECT_EQ(phase(current), "Running");
  EXPECT_EQ(status_of(current).value("restarts", 0), 0);
  EXPECT_EQ(status_of(current)["resizes"], 1);
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
