// A finished TrainingJob stays finished and its status stays true (issue 14): the final status
// keeps the last step the stages reported even when the operator restarted after their last
// reports; a run whose every rank reported its last step is Succeeded whatever its pods do as
// they exit; a pod that Succeeded is not lost with its node; a restart decided on a cache behind
// the API tears nothing down; stray pods of a finished job are deleted.
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

class TrainingJobTerminal : public TrainingJobReconcilerTest {
 protected:
  // Progress of a 2 x 2 job of 40 steps at `step`.
  static JobProgress at_step(int64_t step, double loss) {
    JobProgress p;
    p.world_size = 4;
    p.started = 4;
    p.step = step;
    p.loss = loss;
    p.tokens_per_s = 1280;
    p.total_steps = 40;
    p.last_checkpoint_step = step / 10 * 10;
    return p;
  }

  void run(const std::string& name) {
    add_node(0, "a1", 2);
    b1_ = add_node(1, "b1", 2);
    create_and_place(job_manifest(name, 2, 2));
    set_phase("Running");
    reconcile(name);
    ASSERT_EQ(phase(job(name)), "Running");
  }

  size_t deleting_pods() const {
    size_t n = 0;
    for (int m = 0; m < 2; ++m)
      for (const json& pod : member_pods(m)) n += kube::is_being_deleted(pod);
    return n;
  }

  static int64_t restarts(const json& job_object) {
    return job_object.value("status", json::object()).value("restarts", int64_t{0});
  }

  std::string b1_;
};

// The operator restarted after the stages' last reports (its Lease lost under load, or killed):
// its stage service holds only what the stages sent since, here two ranks' resent Done and no
// step every rank has passed. The final status keeps the step the status showed, with that
// step's own loss, instead of step 0 without a loss.
TEST_F(TrainingJobTerminal, AnOperatorRestartedAfterTheLastReportsKeepsTheShownStepAndLoss) {
  run("restarted");
  stages_.set_progress(key("restarted"), at_step(38, 2.5));
  reconcile("restarted");
  ASSERT_EQ(job("restarted")["status"]["progress"]["step"], 38);

  stages_.unregister_job(key("restarted"));  // the new operator's stage service
  make_reconciler();
  JobProgress resent;
  resent.world_size = 4;
  resent.done = 2;
  stages_.set_progress(key("restarted"), resent);
  set_phase("Succeeded");
  reconcile("restarted");
  const json current = job("restarted");
  ASSERT_EQ(phase(current), "Succeeded") << current["status"].dump();
  EXPECT_EQ(current["status"]["progress"]["step"], 38) << current["status"].dump();
  ASSERT_TRUE(current["status"]["progress"].contains("loss")) << current["status"].dump();
  EXPECT_DOUBLE_EQ(current["status"]["progress"]["loss"].get<double>(), 2.5);
  EXPECT_FALSE(current["status"]["progress"].contains("eta"));
}

// Every rank reported Done: training is over. A node lost as the pods exit (or a pod failing
// on its way out) does not restart it.
TEST_F(TrainingJobTerminal, EveryRankDoneIsSucceededWhateverThePodsDoAsTheyExit) {
  run("done");
  JobProgress last = at_step(40, 2.25);
  last.done = 4;
  stages_.set_progress(key("done"), last);
  lose_node(1, b1_);
  set_phase("Failed", member_pods(1).front()["metadata"]["name"].get<std::string>());
  reconcile("done");
  json current = job("done");
  EXPECT_EQ(phase(current), "Succeeded") << current["status"].dump();
  EXPECT_EQ(restarts(current), 0);
  EXPECT_EQ(current["status"]["progress"]["step"], 40);
  EXPECT_DOUBLE_EQ(current["status"]["progress"]["loss"].get<double>(), 2.25);
  EXPECT_EQ(condition(current, "Degraded").value("status", "False"), "False");
  EXPECT_EQ(deleting_pods(), 0u);
  EXPECT_FALSE(stages_.registration(key("done")).has_value());

  reconcile("done");
  current = job("done");
  EXPECT_EQ(phase(current), "Succeeded");
  EXPECT_EQ(restarts(current), 0);
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_EQ(deleting_pods(), 0u);
}

// Two ranks finished (their pods Succeeded) on a node that is then lost while the others finish
// their last step: nothing of the job was lost with it.
TEST_F(TrainingJobTerminal, ASucceededPodsNodeLostDoesNotRestartTheJob) {
  run("early");
  for (const json& pod : member_pods(1))
    set_phase("Succeeded", pod["metadata"]["name"].get<std::string>());
  lose_node(1, b1_);
  reconcile("early");
  json current = job("early");
  EXPECT_EQ(phase(current), "Running") << current["status"].dump();
  EXPECT_EQ(restarts(current), 0);
  EXPECT_EQ(deleting_pods(), 0u);

  set_phase("Succeeded");
  reconcile("early");
  current = job("early");
  EXPECT_EQ(phase(current), "Succeeded") << current["status"].dump();
  EXPECT_EQ(restarts(current), 0);
}

// The API holds the job Succeeded (written by another operator, or by this one a moment ago)
// while the cache still shows it Running, and a pod of the finished attempt is seen Failed: the
// restart decision is written first, conflicts, and nothing is torn down.
TEST_F(TrainingJobTerminal, AFailureSeenOnAStaleCacheOfAFinishedJobTearsNothingDown) {
  run("stale");
  sync_job("stale");
  informer_->stop();  // the cache stays behind from here
  hub_->admin().patch(jobs_, ns_, "stale", kube::PatchType::kMerge,
                      {{"status", {{"phase", "Succeeded"}}}}, {}, "status");
  set_phase("Failed", member_pods(0).front()["metadata"]["name"].get<std::string>());
  sync_members();
  const kube::ReconcileResult result = reconciler_->reconcile(key("stale"));
  EXPECT_TRUE(result.requeue);
  const json current = job("stale");
  EXPECT_EQ(phase(current), "Succeeded") << current["status"].dump();
  EXPECT_EQ(restarts(current), 0);
  EXPECT_EQ(deleting_pods(), 0u) << "pods of a finished job torn down from a stale cache";
  EXPECT_EQ(pod_count(), 4u);
}

// A pod of another attempt in a Succeeded job (made from a stale view) is deleted; the
// finished attempt's pods are kept.
TEST_F(TrainingJobTerminal, AStrayPodOfAFinishedJobIsDeleted) {
  run("strays");
  set_phase("Succeeded");
  reconcile("strays");
  ASSERT_EQ(phase(job("strays")), "Succeeded");
  json stray = member_pods(0).front();
  stray["metadata"] = {{"name", "strays-stray"},
                       {"namespace", ns_},
                       {"labels", stray["metadata"]["labels"]},
                       {"annotations", {{kAttemptAnnotation, "1"}}}};
  stray.erase("status");
  members_[0]->admin().create(core("pods"), ns_, stray);
  reconcile("strays");
  for (int m = 0; m < 2; ++m) {
    for (const json& pod : member_pods(m)) {
      const bool is_stray = kube::object_name(pod) == "strays-stray";
      EXPECT_EQ(kube::is_being_deleted(pod), is_stray) << kube::object_name(pod);
    }
  }
  EXPECT_EQ(phase(job("strays")), "Succeeded");
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
