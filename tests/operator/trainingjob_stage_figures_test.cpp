// status.progress.stages as the reconciler writes it through the API (the CRD's schema checks
// it there): per stage, the slowest replica's latest step time, bubble and network wait.
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

TEST_F(TrainingJobReconcilerTest, RunningWritesEachStagesFiguresIntoTheStatus) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("figures", 2, 2));
  set_phase("Running");
  JobProgress progress = four_ranks_at(10);
  progress.stages = {{.stage = 0,
                      .replica = 1,
                      .step = 11,
                      .step_s = 1.23456,
                      .bubble_fraction = 0.25,
                      .network_wait_s = 0.5},
                     {.stage = 1,
                      .replica = 0,
                      .step = 10,
                      .step_s = 1.2,
                      .bubble_fraction = 0.125,
                      .network_wait_s = 0.0123}};
  stages_.set_progress(key("figures"), progress);
  reconcile("figures");
  const json current = job("figures");
  ASSERT_EQ(phase(current), "Running") << current["status"].dump();
  const json stages = current["status"]["progress"]["stages"];
  ASSERT_EQ(stages.size(), 2u) << current["status"].dump();
  EXPECT_EQ(stages[0]["stage"], 0);
  EXPECT_EQ(stages[0]["replica"], 1);
  EXPECT_EQ(stages[0]["step"], 11);
  EXPECT_DOUBLE_EQ(stages[0]["stepSeconds"].get<double>(), 1.235);
  EXPECT_DOUBLE_EQ(stages[0]["bubble"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(stages[0]["networkWaitSeconds"].get<double>(), 0.5);
  EXPECT_EQ(stages[1]["stage"], 1);
  EXPECT_DOUBLE_EQ(stages[1]["networkWaitSeconds"].get<double>(), 0.0123);
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
