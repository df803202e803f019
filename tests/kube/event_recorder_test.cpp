#include "kube/event_recorder.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "kube/leader_election.h"
#include "tests/kube/fake_transport.h"
#include "tests/kube/fixtures.h"
#include "tests/kube/recorded_request.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using testing::answer;
using testing::expect_fixture_request;
using testing::fixture;
using testing::fixture_answer;
using testing::fixture_body;
using testing::header_of;

// The TrainingJob of the captured event (its reference carried resourceVersion "0").
json training_job() {
  return {{"apiVersion", "tessel.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata",
           {{"name", "gpt-a"},
            {"namespace", "default"},
            {"uid", "9cb914b6-62d7-49e5-81a5-6df8560286df"},
            {"resourceVersion", "0"}}}};
}

constexpr char kMessage[] = "placed 32 tasklets on 4 clusters (cost 12.3s/iter)";

class EventRecorderTest : public ::testing::Test {
 protected:
  EventRecorderTest() {
    ClientOptions client_options;
    client_options.qps = 0;
    client_options.sleeper = [](std::chrono::nanoseconds) {};
    client_options.backoff.steps = 1;
    client_ = std::make_unique<Client>(transport_, client_options);
    options_.now = [this] { return now_; };
    options_.logger = std::make_shared<const Logger>(
        "events", LogLevel::kDebug, [this](std::string_view line) { log_.emplace_back(line); });
  }

  EventRecorder& recorder() {
    if (!recorder_) {
      recorder_ = std::make_unique<EventRecorder>(
          *client_, EventSource{"tessel-operator", "", "tessel-operator-7d9f8-abcde"}, options_);
    }
    return *recorder_;
  }

  EventOutcome record_placed() {
    return recorder().record(training_job(), EventType::kNormal, "Placed", kMessage);
  }

  std::shared_ptr<testing::FakeTransport> transport_ = std::make_shared<testing::FakeTransport>();
  std::unique_ptr<Client> client_;
  EventRecorderOptions options_;
  std::unique_ptr<EventRecorder> recorder_;
  std::chrono::system_clock::time_point now_ = parse_micro_time("2026-11-21T23:01:50.000000Z");
  std::vector<std::string> log_;
};

TEST_F(EventRecorderTest, FirstOccurrenceCreatesTheEventAsCaptured) {
  transport_->push(fixture_answer("201-create-event-core-v1.json"));
  EXPECT_EQ(record_placed(), EventOutcome::kCreated);
  ASSERT_EQ(transport_->request_count(), 1u);
  const HttpRequest request = transport_->request(0);
  json body = json::parse(request.body);
  // The captured name was made up; ours follows client-go: "<object>.<unix nanoseconds, hex>".
  EXPECT_EQ(body["metadata"]["name"], "gpt-a.18ea31c1d30f2c00");
  json expected = fixture("201-create-event-core-v1.json")["request"]["body"];
  body["metadata"].erase("name");
  expected["metadata"].erase("name");
  EXPECT_EQ(body, expected);
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.target, "/api/v1/namespaces/default/events");
  EXPECT_EQ(header_of(request, "Content-Type"), "application/json");
}

TEST_F(EventRecorderTest, RepeatsWithinTheWindowPatchTheCountOfTheExistingEvent) {
  transport_->push(fixture_answer("201-create-event-core-v1.json"));
  record_placed();
  for (int i = 0; i < 2; ++i) {
    now_ += std::chrono::minutes(4);
    json patched = fixture_body("201-create-event-core-v1.json");
    transport_->push(answer(200, patched));
    EXPECT_EQ(record_placed(), EventOutcome::kAggregated);
  }
  ASSERT_EQ(transport_->request_count(), 3u);
  for (int i = 1; i <= 2; ++i) {
    const HttpRequest patch = transport_->request(i);
    EXPECT_EQ(patch.method, "PATCH");
    // The server's name of the event (from the create answer) is the one patched.
    EXPECT_EQ(patch.target, "/api/v1/namespaces/default/events/gpt-a.17a9c2f0d1e2f3a4");
    EXPECT_EQ(header_of(patch, "Content-Type"), "application/strategic-merge-patch+json");
    const json body = json::parse(patch.body);
    EXPECT_EQ(body["count"], i + 1);
    EXPECT_EQ(body["lastTimestamp"], i == 1 ? "2026-11-21T23:05:50Z" : "2026-11-21T23:09:50Z");
  }
}

TEST_F(EventRecorderTest, ARepeatAfterTheWindowIsANewEvent) {
  transport_->push(fixture_answer("201-create-event-core-v1.json"));
  record_placed();
  now_ += std::chrono::minutes(10) + std::chrono::seconds(1);
  transport_->push(fixture_answer("201-create-event-core-v1.json"));
  EXPECT_EQ(record_placed(), EventOutcome::kCreated);
  EXPECT_EQ(transport_->request(1).method, "POST");
  EXPECT_EQ(json::parse(transport_->request(1).body)["count"], 1);
}

TEST_F(EventRecorderTest, DifferentMessageReasonOrTypeIsADifferentEvent) {
  for (int i = 0; i < 4; ++i) transport_->push(fixture_answer("201-create-event-core-v1.json"));
  record_placed();
  EXPECT_EQ(recorder().record(training_job(), EventType::kNormal, "Placed", "other"),
            EventOutcome::kCreated);
  EXPECT_EQ(recorder().record(training_job(), EventType::kNormal, "Moved", kMessage),
            EventOutcome::kCreated);
  EXPECT_EQ(recorder().record(training_job(), EventType::kWarning, "Placed", kMessage),
            EventOutcome::kCreated);
  EXPECT_EQ(json::parse(transport_->request(3).body)["type"], "Warning");
}

TEST_F(EventRecorderTest, AnEventDeletedMeanwhileIsCreatedAgainKeepingItsCount) {
  transport_->push(fixture_answer("201-create-event-core-v1.json"));
  record_placed();
  now_ += std::chrono::minutes(1);
  transport_->push(answer(404, {{"kind", "Status"}, {"code", 404}, {"reason", "NotFound"}}));
  transport_->push(fixture_answer("201-create-event-core-v1.json"));
  EXPECT_EQ(record_placed(), EventOutcome::kCreated);
  ASSERT_EQ(transport_->request_count(), 3u);
  const json body = json::parse(transport_->request(2).body);
  EXPECT_EQ(body["count"], 2);
  EXPECT_EQ(body["firstTimestamp"], "2026-11-21T23:01:50Z");
  EXPECT_EQ(body["lastTimestamp"], "2026-11-21T23:02:50Z");
  EXPECT_EQ(body["metadata"]["name"], "gpt-a.17a9c2f0d1e2f3a4");
}

TEST_F(EventRecorderTest, SpamFilterDropsBeyondTheBurstAndRefills) {
  options_.spam_burst = 3;
  for (int i = 0; i < 4; ++i) transport_->push(fixture_answer("201-create-event-core-v1.json"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(recorder().record(training_job(), EventType::kNormal, "Step", std::to_string(i)),
              EventOutcome::kCreated);
  }
  EXPECT_EQ(recorder().record(training_job(), EventType::kNormal, "Step", "3"),
            EventOutcome::kDropped);
  EXPECT_EQ(transport_->request_count(), 3u);
  now_ += std::chrono::minutes(5);
  EXPECT_EQ(recorder().record(training_job(), EventType::kNormal, "Step", "4"),
            EventOutcome::kCreated);
  EXPECT_EQ(recorder().record(training_job(), EventType::kNormal, "Step", "5"),
            EventOutcome::kDropped);
  // Another object has its own bucket.
  json other = training_job();
  other["metadata"]["name"] = "gpt-b";
  other["metadata"]["uid"] = "u-b";
  transport_->push(fixture_answer("201-create-event-core-v1.json"));
  EXPECT_EQ(recorder().record(other, EventType::kNormal, "Step", "0"), EventOutcome::kCreated);
}

TEST_F(EventRecorderTest, ApiFailuresAreLoggedNotThrown) {
  transport_->push(fixture_answer("403-forbidden-serviceaccount-create.json"));
  EXPECT_EQ(record_placed(), EventOutcome::kFailed);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find("event not recorded"), std::string::npos) << log_.back();
  EXPECT_NE(log_.back().find("403"), std::string::npos) << log_.back();
  // Nothing was remembered: the next occurrence is created, not patched.
  transport_->push(fixture_answer("201-create-event-core-v1.json"));
  EXPECT_EQ(record_placed(), EventOutcome::kCreated);
}

TEST_F(EventRecorderTest, ClusterScopedObjectsGetTheirEventsInDefault) {
  transport_->push(fixture_answer("201-create-event-core-v1.json"));
  const json node = {
      {"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "gpu-node-a"}}}};
  recorder().record(node, EventType::kWarning, "Unreachable", "no probe answer");
  EXPECT_EQ(transport_->request(0).target, "/api/v1/namespaces/default/events");
  EXPECT_FALSE(json::parse(transport_->request(0).body)["involvedObject"].contains("namespace"));
}

TEST_F(EventRecorderTest, RefusesIncompleteInput) {
  EXPECT_THROW(recorder().record(json::object(), EventType::kNormal, "R", "m"),
               std::invalid_argument);
  EXPECT_THROW(recorder().record(training_job(), EventType::kNormal, "", "m"),
               std::invalid_argument);
  EXPECT_THROW(EventRecorder(*client_, EventSource{}, options_), std::invalid_argument);
  EXPECT_EQ(transport_->request_count(), 0u);
}

TEST_F(EventRecorderTest, EventsForObjectListsByInvolvedObject) {
  transport_->push(fixture_answer("200-list-events-for-object.json"));
  const std::vector<json> events = events_for_object(*client_, training_job());
  expect_fixture_request(transport_->request(0), "200-list-events-for-object.json");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "Placed");
}

}  // namespace
}  // namespace tessel::kube
