// Events about a cluster-scoped object: written to "default" with no involvedObject.namespace
// (as client-go does), and found again as kubectl describe finds them, across namespaces.
#include <gtest/gtest.h>

#include "kube/event_recorder.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;

TEST(ClusterScopedEvents, AreFoundForTheObject) {
  testing::TestCluster cluster;
  const ResourceInfo namespaces = *ResourceRegistry().find_resource("", "namespaces");
  const json object = cluster.admin().get(namespaces, "", cluster.namespace_name());
  EventRecorderOptions options;
  options.logger =
      std::make_shared<const Logger>("test", LogLevel::kError, [](std::string_view) {});
  EventRecorder recorder(cluster.admin(), {"tessel-tests", "", ""}, options);
  ASSERT_EQ(recorder.record(object, EventType::kNormal, "Checked", "cluster-scoped"),
            EventOutcome::kCreated);
  const std::vector<json> events = events_for_object(cluster.admin(), object);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["metadata"]["namespace"], "default");
  EXPECT_EQ(events[0]["reason"], "Checked");
  EXPECT_FALSE(events[0]["involvedObject"].contains("namespace"));
}

}  // namespace
}  // namespace tessel::kube
