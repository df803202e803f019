// The TrainingJob reconciler against a hub and two member clusters (API test servers, or real
// clusters through TESSEL_TEST_KUBECONFIG and TESSEL_TEST_MEMBER_KUBECONFIGS): crds/ installed
// in the hub, the member registry fed by hand, GPU Nodes made by the test, and the test playing
// the kubelet (it writes the pods' phase and finishes their graceful deletion). Each case calls
// reconcile(key) once the informers show what the API holds, and asserts on what the API holds
// afterwards: the job's status, conditions and Events, and the objects in every member.
#include <tuple>

#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

// 1. The finalizer first; then a placement over both members, the objects in each.
TEST_F(TrainingJobReconcilerTest, AddsTheFinalizerThenPlacesAcrossBothMembers) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_job(job_manifest("pair", 2, 2));
  reconcile("pair");
  json current = job("pair");
  EXPECT_TRUE(kube::has_finalizer(current, kCleanupFinalizer));
  EXPECT_EQ(pod_count(), 0u) << "the finalizer comes before anything is created";

  reconcile("pair");
  current = job("pair");
  EXPECT_EQ(phase(current), "Starting");
  const json placed = condition(current, "Placed");
  EXPECT_EQ(placed.value("status", ""), "True") << current["status"].dump();
  EXPECT_NE(placed.value("message", "").find("2 stages x 2 replicas on member-a,member-b"),
            std::string::npos)
      << placed.dump();
  EXPECT_NE(placed.value("message", "").find("predicted iteration"), std::string::npos);
  EXPECT_EQ(condition(current, "Valid").value("status", ""), "True");
  EXPECT_EQ(current["status"]["placement"]["clusters"], "member-a,member-b");
  EXPECT_EQ(current["status"]["placement"]["stages"].size(), 2u);
  EXPECT_TRUE(has_event("pair", "Placed"));
  EXPECT_TRUE(has_event("pair", "PodsCreated"));

  const std::string uid = kube::object_uid(current);
  for (int m = 0; m < 2; ++m) {
    const std::vector<json> pods = remote(m, "pods", current);
    ASSERT_EQ(pods.size(), 2u) << kMembers[m];
    for (const json& pod : pods) {
      EXPECT_EQ(kube::get_label(pod, kJobNameLabel), "pair");
      EXPECT_EQ(kube::get_label(pod, kJobNamespaceLabel), ns_);
      EXPECT_EQ(kube::get_label(pod, kJobUidLabel), uid);
      EXPECT_TRUE(kube::get_label(pod, kRankLabel).has_value());
      EXPECT_EQ(pod["spec"]["nodeName"], run_ + (m == 0 ? "-a1" : "-b1"));
    }
    const std::vector<json> maps = remote(m, "configmaps", current);
    ASSERT_EQ(maps.size(), 1u) << kMembers[m];
    EXPECT_EQ(kube::object_name(maps[0]), "pair-stage");
    const json file = json::parse(maps[0]["data"]["job.json"].get<std::string>());
    EXPECT_EQ(file["rendezvous"]["address"], kStageService);
    EXPECT_EQ(in_pod(file["rendezvous"]["token_file"]), kStageTokenPath);
    EXPECT_EQ(in_pod(file["rendezvous"]["ca_file"]), kStageCaPath);
    EXPECT_EQ(file["rendezvous"]["advertise_env"], kPodIpVariable);
    EXPECT_EQ(file["progress"]["address"], kStageService);
    EXPECT_EQ(in_pod(file["progress"]["token_file"]), kStageTokenPath);
    EXPECT_EQ(in_pod(file["progress"]["ca_file"]), kStageCaPath);
    EXPECT_EQ(file["checkpoint"]["shared"], false);
    EXPECT_EQ(file["ranks"].size(), 4u);
    EXPECT_EQ(file["data"]["path"], "/usr/share/tessel/examples/trainingjobs/../data/fables.txt");
    const std::vector<json> secrets = remote(m, "secrets", current);
    ASSERT_EQ(secrets.size(), 1u) << kMembers[m];
    EXPECT_EQ(kube::base64_decode(secrets[0]["data"]["ca.crt"].get<std::string>()), kCaPem);
  }

  // The token: in a hub Secret the job owns, the same the members and the stage service hold.
  const json token_secret = hub_->admin().get(core("secrets"), ns_, "pair-stage-token");
  const auto owner = kube::controller_owner(token_secret);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ((*owner)["uid"], uid);
  const std::string token = *kube::base64_decode(token_secret["data"]["token"].get<std::string>());
  EXPECT_EQ(token.size(), 64u);
  const std::string member_token =
      *kube::base64_decode(remote(1, "secrets", current)[0]["data"]["token"].get<std::string>());
  EXPECT_EQ(member_token, token);
  const auto registration = stages_.registration(key("pair"));
  ASSERT_TRUE(registration.has_value());
  EXPECT_EQ(registration->token, token);
  EXPECT_EQ(registration->world_size, 4);

  // Level-triggered: another reconcile of the same state creates nothing more.
  reconcile("pair");
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_EQ(phase(job("pair")), "Starting");
}

// 2. Too few GPUs: Pending with the reason, a NotPlaced Event; a new node lets it start.
TEST_F(TrainingJobReconcilerTest, WaitsPendingForGpusThenPlacesWhenANodeIsAdded) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 1);
  create_and_place(job_manifest("big", 2, 2));
  json current = job("big");
  EXPECT_EQ(phase(current), "Pending");
  const json placed = condition(current, "Placed");
  EXPECT_EQ(placed.value("status", ""), "False");
  EXPECT_EQ(placed.value("reason", ""), "NotEnoughGPUs");
  EXPECT_NE(placed.value("message", "").find("needs 4 GPUs; 3 free"), std::string::npos)
      << placed.dump();
  EXPECT_TRUE(has_event("big", "NotPlaced"));
  EXPECT_EQ(pod_count(), 0u);
  EXPECT_EQ(reconciler_->waiting_jobs(), std::vector<std::string>{key("big")});

  add_node(1, "b2", 1);
  reconcile("big");
  current = job("big");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(condition(current, "Placed").value("status", ""), "True");
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_TRUE(reconciler_->waiting_jobs().empty());
}

// 2b. A node of the placement whose prober annotation is refused: a BadLinkAnnotation warning
// naming it, its links estimated and the reason in LinksMeasured; a refused node the placement
// does not use (no free GPU) gets no Event.
TEST_F(TrainingJobReconcilerTest, ARefusedLinksAnnotationOfAPlacedNodeIsAWarningEvent) {
  const std::string a1 = add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  const std::string a2 = add_node(0, "a2", 0);
  for (const std::string& node : {a1, a2}) {
    members_[0]->admin().patch(
        core("nodes"), "", node, kube::PatchType::kMerge,
        {{"metadata", {{"annotations", {{api::kLinksAnnotation, "{not json"}}}}}});
  }
  create_and_place(job_manifest("hostile", 2, 2));
  const json current = job("hostile");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  const json links = condition(current, "LinksMeasured");
  EXPECT_EQ(links.value("status", ""), "False");
  EXPECT_NE(links.value("message", "")
                .find("member-a/" + a1 + ": metadata.annotations[" + api::kLinksAnnotation +
                      "]: is not a JSON object"),
            std::string::npos)
      << links.dump();
  std::vector<std::string> warnings;
  for (const json& e : events("hostile")) {
    if (e.value("reason", "") == "BadLinkAnnotation") {
      EXPECT_EQ(e.value("type", ""), "Warning");
      warnings.push_back(e.value("message", ""));
    }
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "Node member-a/" + a1 + ": its " + api::kLinksAnnotation +
                             " annotation was refused and its links estimated: "
                             "metadata.annotations[net.tessel.dev/links]: is not a JSON object");
}

// 2c. Links measured through site aggregates only: LinksMeasured is True and says how many
// pairs rest on aggregates, and whose.
TEST_F(TrainingJobReconcilerTest, LinksFromSiteAggregatesAreMeasuredAndSaidSo) {
  const std::string a1 = add_node(0, "a1", 2);
  const std::string b1 = add_node(1, "b1", 2);
  const std::string at = kube::format_rfc3339(std::chrono::system_clock::now());
  for (const auto& [member, node, site] :
       {std::tuple{0, a1, "member-b/*"}, std::tuple{1, b1, "member-a/*"}}) {
    api::NodeLinks links;
    links.peers[site] = {30.0, 35.0, 0.1, 0.5, at};
    members_[member]->admin().patch(
        core("nodes"), "", node, kube::PatchType::kMerge,
        {{"metadata",
          {{"annotations", {{api::kLinksAnnotation, api::format_node_links(links)}}}}}});
  }
  create_and_place(job_manifest("aggregated", 2, 2));
  const json current = job("aggregated");
  const json links = condition(current, "LinksMeasured");
  EXPECT_EQ(links.value("status", ""), "True") << links.dump();
  EXPECT_NE(links.value("message", "").find("1 of the 1 rest on a node's site aggregate"),
            std::string::npos)
      << links.dump();
  const json listed = current["status"]["placement"]["links"];
  ASSERT_EQ(listed.size(), 1u) << current["status"]["placement"].dump();
  EXPECT_EQ(listed[0]["source"], "aggregated");
  EXPECT_DOUBLE_EQ(listed[0]["gbps"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(listed[0]["rttMs"].get<double>(), 30.0);
}

// 3. GPUs just given to one job are not given to the next, even before the members' caches
// show the first job's pods.
TEST_F(TrainingJobReconcilerTest, NeverGivesOneGpuToTwoJobs) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  for (const char* name : {"one", "two", "three"}) {
    create_job(job_manifest(name, 2, 1));
    reconcile(name);  // the finalizer
    sync_job(name);
  }
  // No waiting for the members' informers between these; on test servers their pod caches are
  // held back meanwhile, so that "two" and "three" can know of "one"'s pods only as the pods the
  // reconciler created (on real clusters the reconciles merely follow each other at once).
  hold_member_pod_caches(true);
  for (const char* name : {"one", "two", "three"}) reconciler_->reconcile(key(name));
  hold_member_pod_caches(false);

  EXPECT_EQ(phase(job("one")), "Starting");
  EXPECT_EQ(phase(job("two")), "Starting");
  EXPECT_EQ(phase(job("three")), "Pending");
  EXPECT_EQ(condition(job("three"), "Placed").value("reason", ""), "NotEnoughGPUs");
  std::map<std::string, int> per_node;
  for (int m = 0; m < 2; ++m)
    for (const json& pod : member_pods(m)) ++per_node[pod["spec"]["nodeName"].get<std::string>()];
  EXPECT_EQ(per_node, (std::map<std::string, int>{{run_ + "-a1", 2}, {run_ + "-b1", 2}}));
  // And again with the caches caught up: still nothing for the third.
  reconcile("three");
  EXPECT_EQ(phase(job("three")), "Pending");
  EXPECT_EQ(pod_count(), 4u);
}

// All or nothing: a member that refuses its objects (no such ServiceAccount there) leaves none
// in the other; once it accepts them, the job is placed.
TEST_F(TrainingJobReconcilerTest, MemberRefusingItsObjectsLeavesNothingAnywhere) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  const json account = {{"apiVersion", "v1"},
                        {"kind", "ServiceAccount"},
                        {"metadata", {{"name", "trainer"}, {"namespace", ns_}}}};
  members_[0]->admin().create(core("serviceaccounts"), ns_, account);
  json manifest = job_manifest("half", 2, 2);
  manifest["spec"]["template"] = {{"serviceAccountName", "trainer"}};
  create_and_place(manifest);
  json current = job("half");
  EXPECT_EQ(phase(current), "Pending");
  const json placed = condition(current, "Placed");
  EXPECT_EQ(placed.value("reason", ""), "CreateFailed");
  EXPECT_NE(placed.value("message", "").find("member-b"), std::string::npos) << placed.dump();
  EXPECT_TRUE(has_event("half", "CreateFailed"));
  for (int m = 0; m < 2; ++m) {
    for (const json& pod : remote(m, "pods", current)) EXPECT_TRUE(kube::is_being_deleted(pod));
    EXPECT_TRUE(remote(m, "configmaps", current).empty()) << kMembers[m];
    EXPECT_TRUE(remote(m, "secrets", current).empty()) << kMembers[m];
  }
  EXPECT_FALSE(stages_.registration(key("half")).has_value());

  members_[1]->admin().create(core("serviceaccounts"), ns_, account);
  finish_deletions();
  reconcile("half");
  current = job("half");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_EQ(current["status"].value("restarts", 0), 0) << "a refused create is not a restart";
}

// 4. A spec the schema accepts but the rules across fields refuse: Valid False, nothing made.
TEST_F(TrainingJobReconcilerTest, InvalidSpecIsFlaggedAndCreatesNothing) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  json manifest = job_manifest("odd", 2, 2);
  manifest["spec"]["batch"]["globalBatch"] = 6;  // not a multiple of replicas x microBatch = 4
  create_and_place(manifest);
  const json current = job("odd");
  const json valid = condition(current, "Valid");
  EXPECT_EQ(valid.value("status", ""), "False");
  EXPECT_NE(valid.value("message", "").find("globalBatch"), std::string::npos) << valid.dump();
  EXPECT_EQ(phase(current), "Pending");
  EXPECT_EQ(pod_count(), 0u);
  for (int m = 0; m < 2; ++m) {
    EXPECT_TRUE(remote(m, "configmaps", current).empty());
    EXPECT_TRUE(remote(m, "secrets", current).empty());
  }
  EXPECT_FALSE(stages_.registration(key("odd")).has_value());
}

// 5. Running with progress from the stage service, then Succeeded.
TEST_F(TrainingJobReconcilerTest, RunningFoldsProgressThenSucceeds) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("run", 2, 2));
  set_phase("Running", "run-s0-r0");
  reconcile("run");
  EXPECT_EQ(phase(job("run")), "Starting") << "one pod Running is not the gang";

  set_phase("Running");
  JobProgress progress = four_ranks_at(10);
  progress.last_checkpoint_step = 5;
  stages_.set_progress(key("run"), progress);
  reconcile("run");
  json current = job("run");
  EXPECT_EQ(phase(current), "Running") << current["status"].dump();
  EXPECT_EQ(condition(current, "Running").value("status", ""), "True");
  EXPECT_EQ(condition(current, "Ready").value("status", ""), "True");
  const json shown = current["status"]["progress"];
  EXPECT_EQ(shown["step"], 10);
  EXPECT_DOUBLE_EQ(shown["loss"].get<double>(), 3.25);
  EXPECT_EQ(shown["tokensPerSecond"], 1280);
  EXPECT_EQ(shown["totalSteps"], 40);
  EXPECT_EQ(shown["lastCheckpointStep"], 5);
  // 30 steps left x (globalBatch 8 x seqLen 32 tokens) / 1280 tokens/s = 6 s.
  EXPECT_EQ(shown["eta"], "6s");
  EXPECT_TRUE(has_event("run", "Running"));

  set_phase("Succeeded");
  progress.step = 40;
  progress.done = 4;
  stages_.set_progress(key("run"), progress);
  reconcile("run");
  current = job("run");
  EXPECT_EQ(phase(current), "Succeeded");
  EXPECT_TRUE(current["status"].contains("completionTime"));
  EXPECT_EQ(condition(current, "Succeeded").value("status", ""), "True");
  EXPECT_EQ(current["status"]["progress"]["step"], 40);
  EXPECT_TRUE(has_event("run", "Succeeded"));
  EXPECT_FALSE(stages_.registration(key("run")).has_value());
  const auto gone = stages_.unregistered();
  EXPECT_NE(std::find(gone.begin(), gone.end(), key("run")), gone.end());
}

// A Succeeded status whose write conflicts (the cache is behind the API) is retried with the
// stages' progress still there: the retry writes the step they reported, not the step 0 of a
// fresh registration.
TEST_F(TrainingJobReconcilerTest, ASucceededWriteThatConflictsKeepsTheProgressForTheRetry) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("racy", 2, 2));
  set_phase("Succeeded");
  JobProgress progress;
  progress.world_size = 4;
  progress.started = progress.done = 4;
  progress.step = progress.total_steps = 40;
  progress.last_checkpoint_step = 40;
  stages_.set_progress(key("racy"), progress);
  sync_job("racy");
  sync_members();
  // Changed behind the cache (its informer stopped, so that it stays behind): the status write
  // from the cached object conflicts.
  informer_->stop();
  hub_->admin().patch(jobs_, ns_, "racy", kube::PatchType::kMerge,
                      {{"metadata", {{"annotations", {{"example.com/touched", "yes"}}}}}});
  const kube::ReconcileResult conflicted = reconciler_->reconcile(key("racy"));
  EXPECT_TRUE(conflicted.requeue);
  EXPECT_NE(phase(job("racy")), "Succeeded");
  EXPECT_TRUE(stages_.registration(key("racy")).has_value()) << "let go before it was written";

  informer_->store().update(job("racy"));  // the cache catches up
  reconciler_->reconcile(key("racy"));
  const json current = job("racy");
  EXPECT_EQ(phase(current), "Succeeded") << current["status"].dump();
  EXPECT_EQ(current["status"]["progress"]["step"], 40) << current["status"].dump();
  EXPECT_FALSE(stages_.registration(key("racy")).has_value());
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
