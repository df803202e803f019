// The TrainingJob reconciler of an operator that has just started (or of a member just added):
// until a member's caches have listed, the absence of a job's pod there says nothing, so no job
// is failed or started again from it; a member that fails from the start holds the jobs no
// longer than one that stops answering would be given.
#include "tests/operator/member_test_support.h"
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

class FreshOperator : public TrainingJobReconcilerTest {
 protected:
  // The member registry of an operator that has just started: member-a's kubeconfig names
  // `member_a_server` instead of member-a's API server; member-b has listed.
  std::unique_ptr<MemberRegistry> fresh_registry(std::chrono::seconds unreachable_after,
                                                 const std::string& member_a_server) {
    std::unique_ptr<MemberRegistry> fresh = make_registry(unreachable_after);
    json config = json::parse(members_[0]->self_contained_kubeconfig());
    config["clusters"][0]["cluster"]["server"] = member_a_server;
    EXPECT_TRUE(connect_member(*fresh, 0, kubeconfig_secret(0, config.dump())).config);
    EXPECT_TRUE(
        connect_member(*fresh, 1, kubeconfig_secret(1, members_[1]->self_contained_kubeconfig()))
            .config);
    EXPECT_TRUE(eventually([&] {
      const auto view = fresh->member(kMembers[1]);
      return view && view->synced;
    })) << "member-b did not sync";
    return fresh;
  }
};

// A job starting in member-a when the operator restarts; the new operator's member-a hangs
// (its first list is still due), member-b has room for the whole job. Before the fix the new
// operator read member-a's empty cache as the pods gone: it failed the attempt and started a
// second copy of the job in member-b while the first still ran in member-a.
TEST_F(FreshOperator, AMemberNotListedYetHoldsTheJobUntilItHasListed) {
  add_node(0, "a1", 2);
  create_and_place(job_manifest("held", 2, 1));
  ASSERT_EQ(member_pods(0).size(), 2u);
  ASSERT_EQ(phase(job("held")), "Starting");
  add_node(1, "b1", 2);

  auto silent = std::make_unique<member_testing::SilentServer>();
  // Far longer than the test: member-a's list stays due however long it hangs or fails.
  const std::unique_ptr<MemberRegistry> fresh =
      fresh_registry(std::chrono::seconds(600), silent->url());
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(fresh->member(kMembers[0])->first_list_pending);
  const std::unique_ptr<TrainingJobReconciler> restarted = reconciler_on(*fresh);

  sync_job("held");
  const kube::ReconcileResult waiting = restarted->reconcile(key("held"));
  EXPECT_GT(waiting.requeue_after.count(), 0) << "it looks again once the member may have listed";
  json current = job("held");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(current["status"].value("restarts", 0), 0) << current["status"].dump();
  EXPECT_TRUE(member_pods(1).empty()) << "a second copy of the job in member-b";
  ASSERT_EQ(member_pods(0).size(), 2u);
  for (const json& pod : member_pods(0)) EXPECT_FALSE(kube::is_being_deleted(pod));

  // member-a answers (its kubeconfig fixed): its pods are the job's gang, which starts running.
  ASSERT_TRUE(
      connect_member(*fresh, 0, kubeconfig_secret(0, members_[0]->self_contained_kubeconfig()))
          .config);
  silent.reset();  // resets the connection of the retired informers' list: they stop at once
  ASSERT_TRUE(eventually([&] {
    const auto view = fresh->member(kMembers[0]);
    return view && view->synced && view->pods_of_job(kube::object_uid(job("held"))).size() == 2;
  })) << "member-a did not list the job's pods";
  EXPECT_FALSE(fresh->member(kMembers[0])->first_list_pending);
  set_phase("Running");
  ASSERT_TRUE(eventually([&] {
    const auto view = fresh->member(kMembers[0]);
    const auto pods = view->pods_of_job(kube::object_uid(job("held")));
    return std::all_of(pods.begin(), pods.end(), [](const json& pod) {
      return pod["status"].value("phase", "") == "Running";
    });
  })) << "member-a's cache did not show the pods Running";
  sync_job("held");
  restarted->reconcile(key("held"));
  current = job("held");
  EXPECT_EQ(phase(current), "Running") << current["status"].dump();
  EXPECT_EQ(current["status"].value("restarts", 0), 0);
  EXPECT_TRUE(member_pods(1).empty());
  EXPECT_EQ(member_pods(0).size(), 2u);
}

// A member whose API server refuses connections from the start is given what a member that
// stops answering is (unreachable_after, 1 s here); then it is unreachable and a new job is
// placed in the member that answers.
TEST_F(FreshOperator, AMemberThatNeverListsHoldsNoJobPastUnreachableAfter) {
  add_node(1, "b1", 2);
  const std::unique_ptr<MemberRegistry> fresh =
      fresh_registry(std::chrono::seconds(1), "https://127.0.0.1:1");
  ASSERT_FALSE(HasFailure());
  const std::unique_ptr<TrainingJobReconciler> restarted = reconciler_on(*fresh);

  create_job(job_manifest("late", 2, 1));
  sync_job("late");
  restarted->reconcile(key("late"));  // the finalizer
  ASSERT_TRUE(eventually([&] {
    sync_job("late");
    restarted->reconcile(key("late"));
    return !member_pods(1).empty();
  })) << "member-a, refusing connections, held the job: " << job("late")["status"].dump();
  const auto refused = fresh->member(kMembers[0]);
  EXPECT_FALSE(refused->first_list_pending);
  EXPECT_EQ(refused->reachable.status, "False") << refused->reachable.message;
  EXPECT_EQ(phase(job("late")), "Starting");
  EXPECT_EQ(member_pods(1).size(), 2u);
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
