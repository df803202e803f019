// Step events of every rank become one summary per step, once every rank has reported it.
#include "noderuntime/launcher/progress_tracker.h"

#include <gtest/gtest.h>

#include <limits>

namespace tessel::launcher {
namespace {

progress::StepMetrics step_line(int step, double loss, double step_s, double wait_s,
                                double bubble) {
  progress::StepMetrics s;
  s.step = step;
  s.loss = loss;
  s.grad_norm = 0.5;
  s.tokens = 1000;
  s.tokens_per_s = 1000 / step_s;
  s.step_s = step_s;
  s.compute_s = step_s / 2;
  s.bubble_fraction = bubble;
  s.network_wait_s = wait_s;
  return s;
}

// The message names the rank and says what is wrong.
void expect_refused(ProgressTracker& tracker, int rank, const progress::StepMetrics& step,
                    const std::string& says) {
  try {
    tracker.add_step(rank, step);
    ADD_FAILURE() << "step " << step.step << " of rank " << rank << " was taken";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(ProgressTracker, StepCompletesWhenEveryRankReportedIt) {
  ProgressTracker tracker(2, 10);
  EXPECT_FALSE(tracker.add_step(0, step_line(1, 5.0, 2.0, 0.2, 0.4)));
  const auto summary = tracker.add_step(1, step_line(1, 5.0, 2.5, 0.4, 0.2));
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->step, 1);
  EXPECT_DOUBLE_EQ(summary->loss, 5.0);
  EXPECT_DOUBLE_EQ(summary->step_s, 2.5);  // the slowest rank
  EXPECT_DOUBLE_EQ(summary->tokens_per_s, 1000 / 2.5);
  EXPECT_DOUBLE_EQ(summary->network_wait_s, 0.3);  // the mean
  EXPECT_DOUBLE_EQ(summary->bubble_fraction, 0.3);
  EXPECT_EQ(tracker.per_rank()[1].size(), 1u);
}

TEST(ProgressTracker, EtaAndIterationLeaveTheFirstStepOut) {
  ProgressTracker tracker(1, 10);
  EXPECT_FALSE(tracker.eta_s());
  EXPECT_FALSE(tracker.iteration_s());
  tracker.add_step(0, step_line(1, 5, 9.0, 0, 0));  // connecting, warming up
  EXPECT_DOUBLE_EQ(*tracker.eta_s(), 9 * 9.0);
  tracker.add_step(0, step_line(2, 4, 1.0, 0, 0));
  tracker.add_step(0, step_line(3, 3, 3.0, 0, 0));
  tracker.add_step(0, step_line(4, 3, 2.0, 0, 0));
  EXPECT_DOUBLE_EQ(*tracker.eta_s(), 6 * 2.0);
  EXPECT_DOUBLE_EQ(*tracker.iteration_s(), 2.0);  // median of 1, 3, 2
  const std::string line = tracker.progress_line(tracker.steps().back());
  EXPECT_EQ(line, "step 4/10  loss 3.0000  500 tok/s  bubble 0%  net wait 0.000 s  ETA 0:12");
  EXPECT_DOUBLE_EQ(*tracker.mean_step_s(), 2.0);  // mean of 1, 3, 2
  tracker.add_step(0, step_line(5, 3, 6.0, 0, 0));  // one longer step (a sync's) moves the mean
  EXPECT_DOUBLE_EQ(*tracker.iteration_s(), 2.5);
  EXPECT_DOUBLE_EQ(*tracker.mean_step_s(), 3.0);  // mean of 1, 3, 2, 6
}

TEST(ProgressTracker, StepsOutOfRangeOrRepeatedAreRefusedNamingTheRank) {
  ProgressTracker tracker(2, 3);
  expect_refused(tracker, 0, step_line(4, 1, 1, 0, 0), "rank 0 reported step 4 of a 3-step job");
  expect_refused(tracker, 1, step_line(0, 1, 1, 0, 0), "rank 1 reported step 0 of a 3-step job");
  ASSERT_FALSE(tracker.add_step(1, step_line(2, 1, 1, 0, 0)));
  expect_refused(tracker, 1, step_line(2, 1, 1, 0, 0), "rank 1 reported step 2 after step 2");
  expect_refused(tracker, 1, step_line(1, 1, 1, 0, 0), "rank 1 reported step 1 after step 2");
  EXPECT_TRUE(tracker.add_step(0, step_line(2, 1, 1, 0, 0)));  // rank 0 resumed at step 2 too
}

TEST(ProgressTracker, DurationsReadLikeAClock) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(59.6), "1:00");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  // What a stalled or hostile stage's step time can make of an ETA.
  EXPECT_EQ(format_duration(kMaxPrintedDuration - 1.5), "99999:59:58");
  EXPECT_EQ(format_duration(kMaxPrintedDuration), ">99999:59:59");
  EXPECT_EQ(format_duration(1e300), ">99999:59:59");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), ">99999:59:59");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::quiet_NaN()), "-");
  EXPECT_EQ(format_duration(-5), "0:00");
}

}  // namespace
}  // namespace tessel::launcher
