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
      final_progress_status(reported(40, 2.25), kShown, std::nullopt, 40, 256, "now");
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
    const std::optional<json> last =
        final_progress_status(behind, kShown, std::nullopt, 40, 256, "now");
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ((*last)["step"], 38);
    EXPECT_DOUBLE_EQ((*last)["loss"].get<double>(), 2.5);
    EXPECT_EQ((*last)["updatedAt"], "2026-11-26T18:00:00Z");
    EXPECT_FALSE(last->contains("eta"));
  }
}

TEST(FinalProgress, NothingReportedAndNothingShownIsNoProgress) {
  EXPECT_FALSE(
      final_progress_status(std::nullopt, json(), std::nullopt, 40, 256, "now").has_value());
  EXPECT_FALSE(
      final_progress_status(reported(-1, NAN), json::object(), std::nullopt, 40, 256, "now"));
  const std::optional<json> first =
      final_progress_status(reported(0, NAN), json(), std::nullopt, 40, 256, "now");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ((*first)["step"], 0);
  EXPECT_FALSE(first->contains("loss"));
}

// The stage pods' termination messages (proto/progress/termination_message.h) when the operator
// missed the stages' last reports: it was down as the job ended.
std::string left(int64_t step, const char* loss, int64_t checkpoint) {
  return std::string(R"({"done":{"step":)") + std::to_string(step) + R"(,"loss":)" + loss +
         R"(,"lastCheckpointStep":)" + std::to_string(checkpoint) + "}}";
}

TEST(FinalProgress, ThePodsFinalFiguresPastTheStatusAreWritten) {
  const std::optional<FinalFigures> finished =
      finished_figures({left(40, "2.25", 40), left(40, "2.25", 40)});
  ASSERT_TRUE(finished.has_value());
  for (const std::optional<JobProgress>& behind :
       {std::optional<JobProgress>(), std::optional<JobProgress>(reported(-1, NAN)),
        std::optional<JobProgress>(reported(12, 3.5))}) {
    const std::optional<json> last =
        final_progress_status(behind, kShown, finished, 40, 256, "now");
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ((*last)["step"], 40);
    EXPECT_EQ((*last)["totalSteps"], 40);
    EXPECT_DOUBLE_EQ((*last)["loss"].get<double>(), 2.25);
    EXPECT_EQ((*last)["lastCheckpointStep"], 40);
    EXPECT_EQ((*last)["tokensPerSecond"], 1900) << "the last rate measured";
    EXPECT_FALSE(last->contains("eta"));
    EXPECT_EQ((*last)["updatedAt"], "now");
  }
  // Nothing shown yet either (the operator never saw a report of this run).
  const std::optional<json> only =
      final_progress_status(std::nullopt, json(), finished, 40, 256, "now");
  ASSERT_TRUE(only.has_value());
  EXPECT_EQ((*only)["step"], 40);
  EXPECT_DOUBLE_EQ((*only)["loss"].get<double>(), 2.25);
}

TEST(FinalProgress, GatheredProgressAsFarAsThePodsIsWritten) {
  const std::optional<json> last = final_progress_status(
      reported(40, 2.2512), kShown, finished_figures({left(40, "2.25", 40)}), 40, 256, "now");
  ASSERT_TRUE(last.has_value());
  EXPECT_DOUBLE_EQ((*last)["loss"].get<double>(), 2.2512);
  EXPECT_EQ((*last)["tokensPerSecond"], 2000);
}

// The shown loss is of step 38: with the final step and no loss known for it, none is shown.
TEST(FinalProgress, PodsThatDoNotKnowTheFinalLossShowNone) {
  const std::optional<json> last = final_progress_status(
      std::nullopt, kShown, finished_figures({left(40, "null", 40)}), 40, 256, "now");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ((*last)["step"], 40);
  EXPECT_FALSE(last->contains("loss"));
}

TEST(FinalProgress, PodsNotPastTheStatusKeepTheStatus) {
  const std::optional<json> last = final_progress_status(
      std::nullopt, kShown, finished_figures({left(38, "9.5", 30)}), 40, 256, "now");
  ASSERT_TRUE(last.has_value());
  EXPECT_DOUBLE_EQ((*last)["loss"].get<double>(), 2.5);
  EXPECT_EQ((*last)["updatedAt"], "2026-11-26T18:00:00Z");
}

TEST(FinalProgress, FinalFiguresAreTheLeastRanksAndNeedEveryRank) {
  // A rank that resumed at the end knows no loss; another rank that trained the step does.
  const std::optional<FinalFigures> mixed =
      finished_figures({left(40, "null", 40), left(40, "2.25", 36), left(40, "2.25", 40)});
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(mixed->step, 40);
  EXPECT_DOUBLE_EQ(mixed->loss, 2.25);
  EXPECT_EQ(mixed->last_checkpoint_step, 36) << "what every rank holds";

  const std::optional<FinalFigures> behind =
      finished_figures({left(40, "2.25", 40), left(39, "2.5", 39)});
  ASSERT_TRUE(behind.has_value());
  EXPECT_EQ(behind->step, 39);
  EXPECT_DOUBLE_EQ(behind->loss, 2.5) << "the loss of the step every rank is past";

  EXPECT_FALSE(finished_figures({}).has_value()) << "no ranks";
  EXPECT_FALSE(finished_figures({left(40, "2.25", 40), ""}).has_value()) << "a rank left none";
  EXPECT_FALSE(finished_figures({left(40, "2.25", 40), "exit 0 from another image"}));
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
