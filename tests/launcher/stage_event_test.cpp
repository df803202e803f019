// What the launcher takes from a stage process's event (stage_event.h): a step into the
// tracker, a start, an error's message, and a rank the job does not have refused by name.
#include "noderuntime/launcher/stage_event.h"

#include <gtest/gtest.h>

namespace tessel::launcher {
namespace {

v1alpha1::StageEvent step_event(int rank, int64_t step) {
  v1alpha1::StageEvent event;
  event.mutable_tasklet()->set_rank(rank);
  event.mutable_step()->set_step(step);
  event.mutable_step()->set_loss(2.5);
  event.mutable_step()->set_step_s(0.5);
  return event;
}

TEST(StageEvent, AStepIsDoneWhenEveryRankReportedIt) {
  ProgressTracker tracker(2, 10);
  EXPECT_FALSE(take_stage_event(tracker, 2, step_event(0, 1)).step_done);
  const TakenEvent last = take_stage_event(tracker, 2, step_event(1, 1));
  EXPECT_EQ(last.rank, 1);
  ASSERT_TRUE(last.step_done);
  EXPECT_EQ(last.step_done->step, 1);
  EXPECT_DOUBLE_EQ(last.step_done->loss, 2.5);
}

TEST(StageEvent, AStartSaysTheStepResumedFromAndAnErrorItsMessage) {
  ProgressTracker tracker(2, 10);
  v1alpha1::StageEvent started;
  started.mutable_tasklet()->set_rank(1);
  started.mutable_started()->set_resumed_from(4);
  const TakenEvent taken = take_stage_event(tracker, 2, started);
  EXPECT_TRUE(taken.started);
  EXPECT_EQ(tracker.resumed_from(), 4);
  v1alpha1::StageEvent error;
  error.mutable_tasklet()->set_rank(0);
  error.mutable_error()->set_message("rank 0: out of memory");
  EXPECT_EQ(take_stage_event(tracker, 2, error).error, "rank 0: out of memory");
}

TEST(StageEvent, ARankTheJobDoesNotHaveIsRefusedByName) {
  ProgressTracker tracker(2, 10);
  for (int rank : {-1, 2}) {
    try {
      take_stage_event(tracker, 2, step_event(rank, 1));
      ADD_FAILURE() << "rank " << rank << " was taken";
    } catch (const StageEventError& e) {
      EXPECT_EQ(std::string(e.what()),
                "a process reported as rank " + std::to_string(rank) + ", the job has 2 ranks");
    }
  }
}

TEST(StageEvent, WhatTheTrackerRefusesIsThrownNamingTheRank) {
  ProgressTracker tracker(2, 10);
  take_stage_event(tracker, 2, step_event(0, 1));
  try {
    take_stage_event(tracker, 2, step_event(0, 1));
    ADD_FAILURE() << "a step reported twice was taken";
  } catch (const StageEventError&) {
    ADD_FAILURE() << "a tracker refusal is not a bad rank";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 reported step 1 after step 1"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessel::launcher
