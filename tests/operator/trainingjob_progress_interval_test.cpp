// The status interval (how often status.progress is written) counts from a progress write that
// landed: a due write lost to a conflict is due again at the next reconcile, not an interval
// later (with a short interval and many progress events, a job could otherwise lose every due
// write and never show a step).
// The interval is longer than any machine's uptime: steady_clock counts from boot, and a job never
// written before must be due however long the machine has been up (with an hour's interval this
// test failed on machines up for less than an hour).
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

TEST_F(TrainingJobReconcilerTest, AProgressWriteLostToAConflictIsDueAgainAtOnce) {
  TESSEL_REQUIRE_TEST_SERVER(*hub_, "holding the hub's TrainingJob cache");
  make_reconciler(std::chrono::hours(24 * 365 * 100));
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("conflicted", 2, 2));
  set_phase("Running");
  stages_.set_progress(key("conflicted"), four_ranks_at(10));
  sync_job("conflicted");
  sync_members();

  // The job's cache stands still while the API's job moves on: the reconcile's status write,
  // which carries the due progress, conflicts.
  hold_job_cache(true);
  hub_->admin().patch(jobs_, ns_, "conflicted", kube::PatchType::kMerge,
                      {{"metadata", {{"labels", {{"touched", "yes"}}}}}});
  EXPECT_TRUE(reconciler_->reconcile(key("conflicted")).requeue);
  EXPECT_FALSE(job("conflicted")["status"].contains("progress"))
      << job("conflicted")["status"].dump();
  hold_job_cache(false);

  // A century's interval has not passed, yet the progress is written now.
  reconcile("conflicted");
  const json current = job("conflicted");
  EXPECT_EQ(current["status"].value("/progress/step"_json_pointer, int64_t{-1}), 10)
      << current["status"].dump();
  EXPECT_DOUBLE_EQ(current["status"].value("/progress/loss"_json_pointer, 0.0), 3.25);
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
