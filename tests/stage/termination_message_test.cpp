// What tessel-stage leaves in its pod's termination message (proto/progress/termination_message.h,
// ProgressReporter::termination_message): the final figures after a done event, read back to the
// same values, the error after a failure, nothing after a stop; and the reader takes nothing else
// for final figures.
#include "proto/progress/termination_message.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "noderuntime/stage/progress_reporter.h"

namespace tessel::stage {
namespace {

using progress::FinalFigures;
using progress::parse_termination_message;

// A reporter that keeps nothing: only the base class' note of the final figures is under test.
class DiscardingReporter : public ProgressReporter {
 public:
  DiscardingReporter() : ProgressReporter(pb::Tasklet()) {}
  bool flush(std::chrono::milliseconds) override { return true; }

 protected:
  void send(pb::StageEvent) override {}
};

pb::StageEvent started(std::optional<int64_t> resumed_from) {
  pb::StageEvent event;
  event.mutable_started()->set_world_size(4);
  event.mutable_started()->set_steps(20);
  if (resumed_from) event.mutable_started()->set_resumed_from(*resumed_from);
  return event;
}

pb::StageEvent step(int64_t n, double loss) {
  pb::StageEvent event;
  event.mutable_step()->set_step(n);
  event.mutable_step()->set_loss(loss);
  return event;
}

pb::StageEvent checkpoint(int64_t n) {
  pb::StageEvent event;
  event.mutable_checkpoint()->set_step(n);
  event.mutable_checkpoint()->set_dir("/ckpt/step-" + std::to_string(n));
  return event;
}

pb::StageEvent done(int64_t n) {
  pb::StageEvent event;
  event.mutable_done()->set_step(n);
  return event;
}

TEST(TerminationMessage, FinalFiguresReadBackToTheirValues) {
  FinalFigures figures;
  figures.step = 123456789012;
  figures.loss = 5.533402442932129;
  figures.last_checkpoint_step = 123456789000;
  const std::string text = progress::termination_message(figures);
  EXPECT_LT(text.size(), progress::kMaxTerminationMessageBytes);
  const std::optional<FinalFigures> back = parse_termination_message(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_EQ(back->step, figures.step);
  EXPECT_EQ(back->loss, figures.loss);
  EXPECT_EQ(back->last_checkpoint_step, figures.last_checkpoint_step);

  figures.loss = std::numeric_limits<double>::quiet_NaN();
  figures.last_checkpoint_step = -1;
  const std::optional<FinalFigures> unknown =
      parse_termination_message(progress::termination_message(figures));
  ASSERT_TRUE(unknown.has_value());
  EXPECT_TRUE(std::isnan(unknown->loss)) << "an unknown loss stays unknown, not 0";
  EXPECT_EQ(unknown->last_checkpoint_step, -1);
}

TEST(TerminationMessage, AnyOtherTextIsNoFinalFigures) {
  const std::string good = R"({"done":{"step":20,"loss":5.1,"lastCheckpointStep":20}})";
  ASSERT_TRUE(parse_termination_message(good).has_value());
  for (const std::string& other : std::vector<std::string>{
           "", "step 3: peer stage 1 replica 0 (10.0.0.7:7000) fell silent",
           good.substr(0, good.size() - 2),  // cut short
           R"({"done":{"step":20,"loss":5.1}})",
           R"({"done":{"step":"20","loss":5.1,"lastCheckpointStep":20}})",
           R"({"done":{"step":20.5,"loss":5.1,"lastCheckpointStep":20}})",
           R"({"done":{"step":-1,"loss":5.1,"lastCheckpointStep":20}})",
           R"({"done":{"step":20,"loss":"low","lastCheckpointStep":20}})",
           R"({"done":{"step":20,"loss":5.1,"lastCheckpointStep":-2}})", R"({"done":20})",
           R"({"stopped":{"step":20}})",
           R"({"done":{"step":20,"loss":5.1,"lastCheckpointStep":20},"more":1})", "[20]"}) {
    EXPECT_FALSE(parse_termination_message(other).has_value()) << other;
  }
}

TEST(TerminationMessage, ADoneProcessLeavesItsLastStepLossAndCheckpoint) {
  DiscardingReporter reporter;
  EXPECT_EQ(reporter.termination_message(), "") << "nothing reported, nothing to say";
  reporter.report(started(std::nullopt));
  reporter.report(step(19, 5.25));
  reporter.report(checkpoint(10));
  reporter.report(step(20, 5.125));
  reporter.report(checkpoint(20));
  reporter.report(done(20));
  const std::optional<FinalFigures> figures =
      parse_termination_message(reporter.termination_message());
  ASSERT_TRUE(figures.has_value()) << reporter.termination_message();
  EXPECT_EQ(figures->step, 20);
  EXPECT_EQ(figures->loss, 5.125);
  EXPECT_EQ(figures->last_checkpoint_step, 20);
}

// A process that resumed from the last step's checkpoint trained nothing: it knows the step and
// the checkpoint, not the loss.
TEST(TerminationMessage, AProcessThatResumedAtTheEndKnowsNoLoss) {
  DiscardingReporter reporter;
  reporter.report(started(20));
  reporter.report(done(20));
  const std::optional<FinalFigures> figures =
      parse_termination_message(reporter.termination_message());
  ASSERT_TRUE(figures.has_value());
  EXPECT_EQ(figures->step, 20);
  EXPECT_TRUE(std::isnan(figures->loss));
  EXPECT_EQ(figures->last_checkpoint_step, 20);
}

TEST(TerminationMessage, AFailedProcessLeavesItsErrorCutToTheKubeletsLimit) {
  DiscardingReporter reporter;
  reporter.report(step(3, 6.5));
  pb::StageEvent failed;
  failed.mutable_error()->set_message("step 4: peer stage 1 replica 0 fell silent " +
                                      std::string(5000, 'x'));
  reporter.report(failed);
  const std::string message = reporter.termination_message();
  EXPECT_EQ(message.size(), progress::kMaxTerminationMessageBytes);
  EXPECT_EQ(message.rfind("step 4: peer stage 1 replica 0 fell silent", 0), 0u) << message;
  EXPECT_FALSE(parse_termination_message(message).has_value());
}

TEST(TerminationMessage, AStoppedProcessLeavesNoFinalFigures) {
  DiscardingReporter reporter;
  reporter.report(step(7, 6.0));
  pb::StageEvent stopped;
  stopped.mutable_stopped()->set_step(7);
  stopped.mutable_stopped()->set_signal("SIGTERM");
  reporter.report(stopped);
  EXPECT_EQ(reporter.termination_message(), "");
}

}  // namespace
}  // namespace tessel::stage
