// The status interval (how often status.progress is written) counts from a progress write that
// landed: a due write lost to a conflict is due again at the next reconcile, not an interval
// later (with a short interval and many progress events, a job could otherwise lose every due
// write and never show a step).
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

TEST_F(TrainingJobReconcilerTest, AProgressWriteLostToAConflictIsDueAgainAtOnce) {
  TESSEL_REQUIRE_TEST_SERVER(*hub_, "holding the hub's TrainingJob cache");
  make_reconciler(std::chrono::hours(1));
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("conflicted", 2, 2));
  set_phase("Running");
  JobProgress progress;
  progress.world_size = 4;
  progress.started = 4;
  progress.step = 10;
  progress.loss = 3.25;
  progress.tokens_per_s = 1280;
  progress.total_steps = 40;
  stages_.set_progress(key("conflicted"), progress);
  sync_job("conflicted");
  sync_members();

  // The job's cache stands still while the API's job moves on: the reconcile's status write,
  // which carries the due progress, conflicts.
  testing::ApiTestServer& hub = *hub_->server();
  hub.set_authorizer([](const testing::RequestAttributes& request) {
    const bool job_read =
        request.resource == "trainingjobs" && (request.verb == "list" || request.verb == "watch");
    return !job_read && request.user.name != "system:anonymous";
  });
  hub.drop_watches();
  hub_->admin().patch(jobs_, ns_, "conflicted", kube::PatchType::kMerge,
                      {{"metadata", {{"labels", {{"touched", "yes"}}}}}});
  EXPECT_TRUE(reconciler_->reconcile(key("conflicted")).requeue);
  EXPECT_FALSE(job("conflicted")["status"].contains("progress"))
      << job("conflicted")["status"].dump();
  hub.set_authorizer(nullptr);

  // An hour's interval has not passed, yet the progress is written now.
  reconcile("conflicted");
  const json current = job("conflicted");
  EXPECT_EQ(current["status"].value("/progress/step"_json_pointer, int64_t{-1}), 10)
      << current["status"].dump();
  EXPECT_DOUBLE_EQ(current["status"].value("/progress/loss"_json_pointer, 0.0), 3.25);
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
