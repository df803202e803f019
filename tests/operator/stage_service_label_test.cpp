// The stage-service label against an API server: two operator replicas' Pods as objects in the
// operator's namespace; the replica that becomes leader labels its own Pod and takes the label
// off the other (a leader that died without cleaning up), keeps it so while it leads, and takes
// its own label off when it stops. Also the --pod-name flag.
#include "operator/app/stage_service_label.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kube/resource.h"
#include "operator/app/operator_flags.h"
#include "tests/support/test_cluster.h"

namespace tessel::app {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::TestCluster;

const kube::ResourceInfo& pods() {
  static const kube::ResourceInfo info = *kube::ResourceRegistry().find_kind("v1", "Pod");
  return info;
}

// Polls `done` every 20 ms for up to `timeout` (a generous bound, not a timing assertion).
template <typename Done>
bool eventually(Done done, std::chrono::steady_clock::duration timeout = seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

class StageServiceLabelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hub_ = cluster_.client();
    create_replica("replica-0", false);
    create_replica("replica-1", true);  // the leader before, gone without cleaning up
  }

  void create_replica(const std::string& name, bool serving) {
    json labels = {{"app.kubernetes.io/name", "tessel"}};
    if (serving) labels[kStageServiceLabel] = kStageServiceServing;
    cluster_.admin().create(
        pods(), cluster_.namespace_name(),
        {{"apiVersion", "v1"},
         {"kind", "Pod"},
         {"metadata", {{"name", name}, {"labels", labels}}},
         {"spec", {{"containers", {{{"name", "operator"}, {"image", "tessel/operator:test"}}}}}}});
  }

  json labels_of(const std::string& name) {
    return cluster_.admin()
        .get(pods(), cluster_.namespace_name(), name)
        .value("/metadata/labels"_json_pointer, json::object());
  }
  bool serving(const std::string& name) {
    return labels_of(name).value(kStageServiceLabel, "") == kStageServiceServing;
  }

  StageServiceLabelOptions options(const std::string& pod_name) {
    return {.namespace_name = cluster_.namespace_name(),
            .pod_name = pod_name,
            .recheck = milliseconds(100),
            .logger = std::make_shared<const kube::Logger>("test", kube::LogLevel::kInfo,
                                                           [this](std::string_view line) {
                                                             std::lock_guard lock(log_mutex_);
                                                             log_.emplace_back(line);
                                                           })};
  }
  std::string log() {
    std::lock_guard lock(log_mutex_);
    std::string text;
    for (const auto& line : log_) text += line + "\n";
    return text;
  }

  TestCluster cluster_;
  std::shared_ptr<kube::Client> hub_;
  std::mutex log_mutex_;
  std::vector<std::string> log_;
};

TEST_F(StageServiceLabelTest, TheNewLeaderLabelsItselfAndTakesTheLabelOffTheOther) {
  StageServiceLabel label(*hub_, options("replica-0"));
  label.claim();
  EXPECT_TRUE(serving("replica-0"));
  EXPECT_FALSE(labels_of("replica-1").contains(kStageServiceLabel)) << labels_of("replica-1");
  // Only that label changes: the Pods keep the others (the Services' selectors).
  EXPECT_EQ(labels_of("replica-1").value("app.kubernetes.io/name", ""), "tessel");
  EXPECT_EQ(labels_of("replica-0").value("app.kubernetes.io/name", ""), "tessel");
  EXPECT_NE(log().find("replica-1"), std::string::npos) << log();

  // Idempotent: a second pass changes nothing.
  const std::string version = cluster_.admin()
                                  .get(pods(), cluster_.namespace_name(), "replica-0")
                                  .value("/metadata/resourceVersion"_json_pointer, "");
  label.claim();
  EXPECT_EQ(cluster_.admin()
                .get(pods(), cluster_.namespace_name(), "replica-0")
                .value("/metadata/resourceVersion"_json_pointer, ""),
            version);

  EXPECT_TRUE(label.release());
  EXPECT_FALSE(labels_of("replica-0").contains(kStageServiceLabel)) << labels_of("replica-0");
  EXPECT_EQ(labels_of("replica-0").value("app.kubernetes.io/name", ""), "tessel");
}

// The leader's life: labelled while it leads (a label put back on another Pod meanwhile is taken
// off again), unlabelled once it stops.
TEST_F(StageServiceLabelTest, WhileLeadingTheLabelIsKeptAndStoppingTakesItOff) {
  StageServiceLabel label(*hub_, options("replica-0"));
  std::jthread leading([&](std::stop_token stop) { label.run(stop); });
  ASSERT_TRUE(eventually([&] { return serving("replica-0") && !serving("replica-1"); })) << log();

  hub_->patch(pods(), cluster_.namespace_name(), "replica-1", kube::PatchType::kMerge,
              {{"metadata", {{"labels", {{kStageServiceLabel, kStageServiceServing}}}}}});
  EXPECT_TRUE(eventually([&] { return !serving("replica-1"); })) << log();
  EXPECT_TRUE(serving("replica-0"));

  leading.request_stop();
  leading.join();
  EXPECT_FALSE(labels_of("replica-0").contains(kStageServiceLabel)) << labels_of("replica-0");
  EXPECT_FALSE(serving("replica-1"));
}

TEST_F(StageServiceLabelTest, AMissingPodIsAnErrorNamingTheFlagAndReleasingItIsDone) {
  StageServiceLabel label(*hub_, options("replica-9"));
  try {
    label.claim();
    FAIL() << "claimed a Pod that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--pod-name: no pod 'replica-9' in namespace '" +
                                         cluster_.namespace_name() + "'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(serving("replica-1")) << "the stale label is off even so";
  EXPECT_TRUE(label.release()) << "a Pod that is gone carries no label";
}

TEST_F(StageServiceLabelTest, AReleaseTheServerRefusesIsLoggedAndReported) {
  TESSEL_REQUIRE_TEST_SERVER(cluster_, "fault injection");
  kube::ClientOptions once = TestCluster::unlimited();
  once.backoff.steps = 1;
  const auto client = cluster_.client(once);
  StageServiceLabel label(*client, options("replica-1"));
  cluster_.server()->fail_next(1, 500);
  EXPECT_FALSE(label.release());
  EXPECT_NE(log().find("could not take the stage-service label off this pod"), std::string::npos)
      << log();
  EXPECT_TRUE(serving("replica-1"));
}

TEST(OperatorFlagsPodName, ComesFromTheFlagOrPodNameAndIsChecked) {
  const auto parse = [](std::vector<std::string> extra) {
    std::vector<std::string> words = {"tessel-operator", "--tls-cert-file=c", "--tls-key-file=k",
                                      "--tls-ca-file=a", "--stage-service-advertise=h:7443"};
    words.insert(words.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    OperatorFlags flags;
    parse_operator_flags(static_cast<int>(argv.size()), argv.data(), flags);
    return flags.pod_name;
  };
  unsetenv("POD_NAME");
  EXPECT_EQ(parse({}), "") << "off without the flag and POD_NAME";
  EXPECT_EQ(parse({"--pod-name=tessel-7d9f-abcde"}), "tessel-7d9f-abcde");
  setenv("POD_NAME", "tessel-from-env", 1);
  EXPECT_EQ(parse({}), "tessel-from-env");
  EXPECT_EQ(parse({"--pod-name=tessel-flag"}), "tessel-flag") << "the flag wins";
  unsetenv("POD_NAME");
  try {
    parse({"--pod-name=Not_A_Pod"});
    FAIL() << "took a bad Pod name";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--pod-name: 'Not_A_Pod' is not a Pod name"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessel::app
