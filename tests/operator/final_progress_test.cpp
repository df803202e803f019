// The progress a finished run's status keeps (final_progress_status), and when the stages'
// reports say training is over (training_finished): the status never goes back to an earlier
// step, nor pairs a step with another step's loss, when the operator's gathered progress is
// behind what the status already shows (an operator restarted after the stages' last reports).
#include <gtest/gtest.h>

#include "operator/controller/job_progress.h"

namespace tessel::controller {
namespace {

using nlohmann::json;

JobProgress reported(int64_t step, double loss) {
  JobProgress p;
  p.world_size = 4;
  p.started = 4;
  p.step = step;
  p.loss = loss;
  p.tokens_per_s = 2000;
  p.total_steps = 40;
  p.last_checkpoint_step = step;
  return p;
}

const json kShown = {{"step", 38},
                     {"totalSteps", 40},
                     {"loss", 2.5},
                     {"tokensPerSecond", 1900},
                     {"eta", "1s"},
                     {"lastCheckpointStep", 30},
                     {"updatedAt", "2026-11-26T18:00:00Z"}};

TEST(FinalProgress, TheReportedStepAtOrPastTheShownOneIsWritten) {
  const std::optional<json> last =
      final_progress_status(reported(40, 2.25), kShown, 40, 256, "now");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ((*last)["step"], 40);
  EXPECT_DOUBLE_EQ((*last)["loss"].get<double>(), 2.25);
  EXPECT_EQ((*last)["tokensPerSecond"], 2000);
  EXPECT_EQ((*last)["lastCheckpointStep"], 40);
  EXPECT_FALSE(last->contains("eta"));
  EXPECT_EQ((*last)["updatedAt"], "now");
}

// An operator that restarted holds only what the stages sent since: a rank that sent nothing
// leaves the step unknown, or a rank resent an older event. The status keeps its own step with
// that step's loss, without an eta.
TEST(FinalProgress, GatheredProgressBehindTheStatusKeepsTheStatus) {
  for (const std::optional<JobProgress>& behind :
       {std::optional<JobProgress>(), std::optional<JobProgress>(reported(-1, NAN)),
        std::optional<JobProgress>(reported(12, 3.5))}) {
    const std::optional<json> last = final_progress_status(behind, kShown, 40, 256, "now");
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ((*last)["step"], 38);
    EXPECT_DOUBLE_EQ((*last)["loss"].get<double>(), 2.5);
    EXPECT_EQ((*last)["updatedAt"], "2026-11-26T18:00:00Z");
    EXPECT_FALSE(last->contains("eta"));
  }
}

TEST(FinalProgress, NothingReportedAndNothingShownIsNoProgress) {
  EXPECT_FALSE(final_progress_status(std::nullopt, json(), 40, 256, "now").has_value());
  EXPECT_FALSE(final_progress_status(reported(-1, NAN), json::object(), 40, 256, "now"));
  const std::optional<json> first = final_progress_status(reported(0, NAN), json(), 40, 256, "now");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ((*first)["step"], 0);
  EXPECT_FALSE(first->contains("loss"));
}

TEST(FinalProgress, TrainingIsFinishedWhenEveryRankSaidDone) {
  JobProgress p = reported(40, 2.25);
  EXPECT_FALSE(training_finished(p));
  p.done = 3;
  EXPECT_FALSE(training_finished(p));
  p.done = 4;
  EXPECT_TRUE(training_finished(p));
  EXPECT_FALSE(training_finished(JobProgress{})) << "no ranks is not a finished run";
}

}  // namespace
}  // namespace tessel::controller
