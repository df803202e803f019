// Per-stage figures in a job's progress: each stage's latest step as its slowest replica timed
// it (step time, bubble, network wait), folded from the stage processes' step events, and how
// status.progress.stages shows them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "operator/controller/job_progress.h"
#include "operator/server/job_progress.h"

namespace tessel::server {
namespace {

namespace pb = tessel::v1alpha1;

// A step event of `rank` in a 3-stage x 2-replica job (rank = replica * 3 + stage).
pb::StageEvent step_event(int rank, int64_t step, double step_s, double bubble, double wait,
                          uint64_t incarnation = 1) {
  pb::StageEvent e;
  pb::Tasklet& t = *e.mutable_tasklet();
  t.set_job_id(9);
  t.set_rank(rank);
  t.set_stage(rank % 3);
  t.set_replica(rank / 3);
  t.set_incarnation(incarnation);
  pb::Step& s = *e.mutable_step();
  s.set_step(step);
  s.set_loss(4.0);
  s.set_tokens_per_s(1000);
  s.set_step_s(step_s);
  s.set_bubble_fraction(bubble);
  s.set_network_wait_s(wait);
  return e;
}

TEST(JobProgressStages, NoStepReportedListsNoStage) {
  JobProgressFold fold(6);
  EXPECT_TRUE(fold.progress().stages.empty());
  const nlohmann::json status = controller::progress_status(fold.progress(), 10, 100, "now");
  EXPECT_FALSE(status.contains("stages"));
}

TEST(JobProgressStages, EachStageShowsItsSlowestReplicasLatestStep) {
  JobProgressFold fold(6);
  // Stage 0: replica 1 is the slower one. Stage 1: replica 0. Stage 2 has not reported.
  fold.add(step_event(0, 1, 2.0, 0.10, 0.20));
  fold.add(step_event(3, 1, 2.5, 0.30, 0.90));
  fold.add(step_event(1, 1, 3.0, 0.05, 1.50));
  fold.add(step_event(4, 1, 1.0, 0.40, 0.10));
  const auto& stages = fold.progress().stages;
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].stage, 0);
  EXPECT_EQ(stages[0].replica, 1);
  EXPECT_EQ(stages[0].step, 1);
  EXPECT_DOUBLE_EQ(stages[0].step_s, 2.5);
  EXPECT_DOUBLE_EQ(stages[0].bubble_fraction, 0.30);  // the same replica's, not the largest
  EXPECT_DOUBLE_EQ(stages[0].network_wait_s, 0.90);
  EXPECT_EQ(stages[1].stage, 1);
  EXPECT_EQ(stages[1].replica, 0);
  EXPECT_DOUBLE_EQ(stages[1].step_s, 3.0);
  EXPECT_DOUBLE_EQ(stages[1].bubble_fraction, 0.05);
  EXPECT_DOUBLE_EQ(stages[1].network_wait_s, 1.50);

  // The next step: replica 0 of stage 0 is now the slow one; its figures replace the others'.
  fold.add(step_event(0, 2, 4.0, 0.20, 2.00));
  EXPECT_EQ(fold.progress().stages[0].replica, 0);
  EXPECT_EQ(fold.progress().stages[0].step, 2);
  EXPECT_DOUBLE_EQ(fold.progress().stages[0].step_s, 4.0);
  fold.add(step_event(3, 2, 1.0, 0.10, 0.10));
  EXPECT_EQ(fold.progress().stages[0].replica, 0);  // still the slowest of the latest steps
}

TEST(JobProgressStages, ARestartedProcessForgetsItsPredecessorsFigures) {
  JobProgressFold fold(6);
  fold.add(step_event(2, 5, 9.0, 0.5, 3.0));
  ASSERT_EQ(fold.progress().stages.size(), 1u);
  pb::StageEvent started = step_event(2, 0, 0, 0, 0, /*incarnation=*/2);
  started.mutable_started()->set_steps(10);
  started.mutable_started()->set_resumed_from(4);
  fold.add(started);
  EXPECT_TRUE(fold.progress().stages.empty());
  // The old process's late step changes nothing.
  EXPECT_FALSE(fold.add(step_event(2, 6, 9.0, 0.5, 3.0, 1)));
  EXPECT_TRUE(fold.progress().stages.empty());
  fold.add(step_event(2, 5, 1.5, 0.25, 0.5, 2));
  ASSERT_EQ(fold.progress().stages.size(), 1u);
  EXPECT_EQ(fold.progress().stages[0].stage, 2);
  EXPECT_DOUBLE_EQ(fold.progress().stages[0].step_s, 1.5);
}

TEST(JobProgressStages, ARankOutsideThePipelineIsLeftOut) {
  JobProgressFold fold(6);
  pb::StageEvent outside = step_event(4, 1, 9.0, 0.5, 3.0);
  outside.mutable_tasklet()->set_replica(-1);  // "not part of the job" (progress.proto)
  fold.add(outside);
  EXPECT_TRUE(fold.progress().stages.empty());
  outside.mutable_tasklet()->set_replica(1);
  outside.mutable_tasklet()->set_stage(-1);
  outside.mutable_tasklet()->set_incarnation(2);
  fold.add(outside);
  EXPECT_TRUE(fold.progress().stages.empty());
}

TEST(JobProgressStages, TheStatusShowsEachStageRoundedAndBounded) {
  JobProgressFold fold(6);
  fold.add(step_event(0, 3, 1.23456789, 0.312345, 0.0456789));
  fold.add(step_event(1, 3, std::numeric_limits<double>::quiet_NaN(), 1.7, -2));
  const nlohmann::json status = controller::progress_status(fold.progress(), 10, 100, "now");
  ASSERT_TRUE(status.contains("stages"));
  const nlohmann::json& stages = status["stages"];
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0]["stage"], 0);
  EXPECT_EQ(stages[0]["replica"], 0);
  EXPECT_EQ(stages[0]["step"], 3);
  EXPECT_DOUBLE_EQ(stages[0]["stepSeconds"].get<double>(), 1.235);
  EXPECT_DOUBLE_EQ(stages[0]["bubble"].get<double>(), 0.3123);
  EXPECT_DOUBLE_EQ(stages[0]["networkWaitSeconds"].get<double>(), 0.04568);
  // Figures the schema would refuse (NaN, negative, a bubble past 1) are shown in range.
  EXPECT_DOUBLE_EQ(stages[1]["stepSeconds"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(stages[1]["bubble"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(stages[1]["networkWaitSeconds"].get<double>(), 0);
}

TEST(JobProgressStages, TheStatusListsAtMostTheCrdsBound) {
  controller::JobProgress progress;
  for (int s = 0; s < int(controller::kMaxStatusStages) + 5; ++s) {
    progress.stages.push_back({.stage = s, .replica = 0, .step = 1, .step_s = 1});
  }
  const nlohmann::json status = controller::progress_status(progress, 10, 100, "now");
  EXPECT_EQ(status["stages"].size(), controller::kMaxStatusStages);
}

}  // namespace
}  // namespace tessel::server
