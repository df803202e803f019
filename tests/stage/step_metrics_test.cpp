// A rank's step metrics (proto/progress/step_metrics.h) keep their value through the Step message
// and through a JSON progress line, and a line tessel-stage printed before the metrics had one
// definition reads back to the values it printed.
#include "proto/progress/step_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "noderuntime/stage/progress_reporter.h"

namespace tessel::progress {
namespace {

namespace pb = tessel::v1alpha1;

// Every field a different value, none of them round in binary.
StepMetrics sample() {
  StepMetrics m;
  m.step = 123456789012;
  m.loss = 5.533402442932129;
  m.grad_norm = 2.304628015817365;
  m.tokens = 9007199254740993;  // 2^53 + 1: no double holds it
  m.tokens_per_s = 93536.3455596748;
  m.step_s = 0.0006842260045232251;
  m.compute_s = 0.0005957249959465116;
  m.bubble_fraction = 0.12934470188455027;
  m.network_wait_s = 1.2885007890872657e-05;
  return m;
}

std::string json_text(const StepMetrics& m) {
  nlohmann::ordered_json line;
  add_step_fields(m, line);
  return line.dump();
}

// What tessel-stage printed for step 1 of a one-rank job (2 layers, hidden 32, seq 16, batch 4)
// at commit e24949c, before the step metrics had one definition.
constexpr const char* kCapturedStepLine =
    R"({"event":"step","rank":0,"stage":0,"replica":0,"step":1,"loss":5.533402442932129,)"
    R"("grad_norm":2.304628015817365,"tokens":64,"tokens_per_s":93536.3455596748,)"
    R"("step_s":0.0006842260045232251,"compute_s":0.0005957249959465116,)"
    R"("bubble_fraction":0.12934470188455027,"network_wait_s":1.2885007890872657e-05})";

TEST(StepMetrics, SurvivesTheStepMessage) {
  const pb::Step message = step_message(sample());
  EXPECT_EQ(message.step(), 123456789012);
  EXPECT_EQ(message.tokens(), 9007199254740993);
  EXPECT_EQ(message.network_wait_s(), 1.2885007890872657e-05);
  EXPECT_EQ(step_metrics(message), sample());
}

TEST(StepMetrics, SurvivesTheJsonLine) {
  const std::string text = json_text(sample());
  EXPECT_EQ(step_metrics_from_json(nlohmann::json::parse(text)), sample()) << text;
}

TEST(StepMetrics, JsonKeysAreTheStepMessageFieldsInTheirOrder) {
  std::vector<std::string> fields;
  const google::protobuf::Descriptor& step = *pb::Step::descriptor();
  for (int i = 0; i < step.field_count(); ++i) fields.push_back(step.field(i)->name());
  const nlohmann::ordered_json line = nlohmann::ordered_json::parse(json_text(sample()));
  std::vector<std::string> keys;
  for (const auto& [key, value] : line.items()) keys.push_back(key);
  EXPECT_EQ(keys, fields);
}

TEST(StepMetrics, ACapturedLineOfTesselStageReadsToItsValues) {
  const StepMetrics m = step_metrics_from_json(nlohmann::json::parse(kCapturedStepLine));
  EXPECT_EQ(m.step, 1);
  EXPECT_EQ(m.loss, 5.533402442932129);
  EXPECT_EQ(m.grad_norm, 2.304628015817365);
  EXPECT_EQ(m.tokens, 64);
  EXPECT_EQ(m.tokens_per_s, 93536.3455596748);
  EXPECT_EQ(m.step_s, 0.0006842260045232251);
  EXPECT_EQ(m.compute_s, 0.0005957249959465116);
  EXPECT_EQ(m.bubble_fraction, 0.12934470188455027);
  EXPECT_EQ(m.network_wait_s, 1.2885007890872657e-05);
}

TEST(StepMetrics, TheStageStillPrintsTheCapturedLineToTheByte) {
  pb::StageEvent event;
  event.mutable_tasklet()->set_rank(0);
  event.mutable_tasklet()->set_stage(0);
  event.mutable_tasklet()->set_replica(0);
  *event.mutable_step() =
      step_message(step_metrics_from_json(nlohmann::json::parse(kCapturedStepLine)));
  EXPECT_EQ(stage::json_line(event), kCapturedStepLine);
}

TEST(StepMetrics, ANonFiniteNumberIsNullInJsonAndReadsAsNaN) {
  StepMetrics diverged = sample();
  diverged.loss = std::numeric_limits<double>::quiet_NaN();
  const nlohmann::json line = nlohmann::json::parse(json_text(diverged));
  EXPECT_TRUE(line.at("loss").is_null()) << line.dump();
  const StepMetrics back = step_metrics_from_json(line);
  EXPECT_TRUE(std::isnan(back.loss));
  EXPECT_EQ(back.grad_norm, diverged.grad_norm);
}

// The message names the key and the value.
void expect_refused(const nlohmann::json& line, const std::string& says) {
  try {
    step_metrics_from_json(line);
    ADD_FAILURE() << "read " << line.dump();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(StepMetrics, AStepLineThatIsNotOneIsRefusedNamingTheKey) {
  const nlohmann::json good = nlohmann::json::parse(json_text(sample()));
  nlohmann::json missing = good;
  missing.erase("compute_s");
  expect_refused(missing, "step line: \"compute_s\" is missing");
  nlohmann::json text = good;
  text["loss"] = "5.5";
  expect_refused(text, "step line: \"loss\" must be a number, got \"5.5\"");
  nlohmann::json fraction = good;
  fraction["tokens"] = 64.5;
  expect_refused(fraction, "step line: \"tokens\" must be an integer in [-2^63, 2^63), got 64.5");
  nlohmann::json huge = good;
  huge["step"] = uint64_t{1} << 63;
  expect_refused(huge, "\"step\" must be an integer in [-2^63, 2^63), got 9223372036854775808");
  expect_refused(nlohmann::json::array(), "step line: expected a JSON object, got []");
}

}  // namespace
}  // namespace tessel::progress
