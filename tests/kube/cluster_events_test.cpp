// Events about an object recorded against a cluster: one core/v1 Event per distinct
// (reason, message, type), repeats aggregated into its count, all found again the way
// `kubectl describe` looks them up, and a repeat whose Event vanished created afresh.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/object.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using tessel::testing::test_job;
using tessel::testing::TestCluster;

const ResourceInfo& events() {
  static const ResourceInfo info = *ResourceRegistry().find_resource("", "events");
  return info;
}

class ClusterEventsTest : public ::testing::Test {
 protected:
  ClusterEventsTest() : jobs_(cluster_.ensure_test_crd()), ns_(cluster_.namespace_name()) {}

  // The object's Events by reason.
  std::map<std::string, json> events_by_reason(const json& object) {
    std::map<std::string, json> by_reason;
    for (json& event : events_for_object(*client_, object)) {
      const std::string reason = event.value("reason", "");
      EXPECT_FALSE(by_reason.contains(reason)) << "two Events with reason " << reason;
      by_reason[reason] = std::move(event);
    }
    return by_reason;
  }

  TestCluster cluster_;
  const ResourceInfo jobs_;
  const std::string ns_;
  const std::shared_ptr<Client> client_ = cluster_.client();
};

TEST_F(ClusterEventsTest, RepeatsAreAggregatedIntoOneEvent) {
  const json job = client_->create(jobs_, ns_, test_job(ns_, "observed"));
  const json other = client_->create(jobs_, ns_, test_job(ns_, "bystander"));
  EventRecorderOptions options;
  options.spam_burst = 0;  // this test is about aggregation, not the spam filter
  EventRecorder recorder(*client_, {"tessel-tests", "", "test-instance"}, options);

  EXPECT_EQ(recorder.record(job, EventType::kNormal, "Placed", "placed on 4 GPUs"),
            EventOutcome::kCreated);
  EXPECT_EQ(recorder.record(job, EventType::kNormal, "Placed", "placed on 4 GPUs"),
            EventOutcome::kAggregated);
  EXPECT_EQ(recorder.record(job, EventType::kNormal, "Placed", "placed on 4 GPUs"),
            EventOutcome::kAggregated);
  EXPECT_EQ(recorder.record(job, EventType::kWarning, "Unschedulable", "no cluster fits"),
            EventOutcome::kCreated);
  EXPECT_EQ(recorder.record(other, EventType::kNormal, "Placed", "placed on 4 GPUs"),
            EventOutcome::kCreated);

  const std::map<std::string, json> found = events_by_reason(job);
  ASSERT_EQ(found.size(), 2u);
  const json& placed = found.at("Placed");
  EXPECT_EQ(placed.value("count", 0), 3);
  EXPECT_EQ(placed.value("type", ""), "Normal");
  EXPECT_EQ(placed.value("message", ""), "placed on 4 GPUs");
  EXPECT_EQ(placed["involvedObject"].value("uid", ""), object_uid(job));
  EXPECT_EQ(placed["involvedObject"].value("kind", ""), "TestJob");
  EXPECT_EQ(placed["source"].value("component", ""), "tessel-tests");
  EXPECT_LE(placed.value("firstTimestamp", ""), placed.value("lastTimestamp", ""));
  const json& warning = found.at("Unschedulable");
  EXPECT_EQ(warning.value("count", 0), 1);
  EXPECT_EQ(warning.value("type", ""), "Warning");
  EXPECT_EQ(events_by_reason(other).at("Placed").value("count", 0), 1);
}

TEST_F(ClusterEventsTest, RepeatOfAVanishedEventCreatesItAgain) {
  const json job = client_->create(jobs_, ns_, test_job(ns_, "observed"));
  EventRecorder recorder(*client_, {"tessel-tests", "", ""});
  ASSERT_EQ(recorder.record(job, EventType::kNormal, "Started", "step 0"), EventOutcome::kCreated);
  const std::vector<json> first = events_for_object(*client_, job);
  ASSERT_EQ(first.size(), 1u);
  client_->remove(events(), ns_, object_name(first[0]));

  // Recreated under its old name, keeping its count and first occurrence.
  EXPECT_EQ(recorder.record(job, EventType::kNormal, "Started", "step 0"), EventOutcome::kCreated);
  const std::vector<json> again = events_for_object(*client_, job);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(object_name(again[0]), object_name(first[0]));
  EXPECT_EQ(again[0].value("count", 0), 2);
  EXPECT_EQ(again[0].value("firstTimestamp", ""), first[0].value("firstTimestamp", ""));
}

}  // namespace
}  // namespace tessel::kube
