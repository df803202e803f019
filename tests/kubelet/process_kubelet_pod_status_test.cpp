// The pod status builder of the process kubelet against the kubelet's rules (getPhase, the
// condition generators) and the fixture 200-pod-status-patch-running.json.
#include "tests/support/process_kubelet_pod_status.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessel::testing {
namespace {

using nlohmann::json;
using State = ContainerView::State;

ContainerView running(const std::string& name) {
  ContainerView view;
  view.name = name;
  view.image = "tessel/stage:0.1.0";
  view.image_id = image_id(view.image);
  view.state = State::kRunning;
  view.running_since = "2026-11-21T23:02:25Z";
  view.container_id = "containerd://1111";
  return view;
}

ContainerView exited(const std::string& name, int exit_code) {
  ContainerView view = running(name);
  view.state = State::kTerminated;
  view.terminated = ContainerTermination{exit_code,
                                         0,
                                         termination_reason(exit_code),
                                         "",
                                         "2026-11-21T23:02:25Z",
                                         "2026-11-21T23:02:30Z",
                                         "containerd://1111"};
  return view;
}

ContainerView waiting(const std::string& name, const std::string& reason) {
  ContainerView view;
  view.name = name;
  view.image = "busybox";
  view.waiting_reason = reason;
  return view;
}

ContainerView crash_looping(const std::string& name, int last_exit_code) {
  ContainerView view = waiting(name, "CrashLoopBackOff");
  view.last_termination = exited(name, last_exit_code).terminated;
  view.restart_count = 1;
  return view;
}

TEST(PodPhaseTest, FollowsTheKubeletsGetPhase) {
  EXPECT_EQ(pod_phase({}, {running("a"), running("b")}, "Never"), "Running");
  EXPECT_EQ(pod_phase({}, {running("a"), waiting("b", "ContainerCreating")}, "Always"), "Pending");
  EXPECT_EQ(pod_phase({}, {exited("a", 0), exited("b", 0)}, "Never"), "Succeeded");
  EXPECT_EQ(pod_phase({}, {exited("a", 0), exited("b", 0)}, "OnFailure"), "Succeeded");
  EXPECT_EQ(pod_phase({}, {exited("a", 0), exited("b", 0)}, "Always"), "Running");
  EXPECT_EQ(pod_phase({}, {exited("a", 0), exited("b", 1)}, "Never"), "Failed");
  EXPECT_EQ(pod_phase({}, {exited("a", 0), crash_looping("b", 1)}, "OnFailure"), "Running");
  EXPECT_EQ(pod_phase({}, {running("a"), exited("b", 1)}, "Never"), "Running");
  EXPECT_EQ(pod_phase({}, {}, "Always"), "Pending");
}

TEST(PodPhaseTest, InitContainersHoldThePodPending) {
  EXPECT_EQ(pod_phase({running("init")}, {waiting("main", "PodInitializing")}, "Never"), "Pending");
  EXPECT_EQ(pod_phase({exited("init", 0)}, {running("main")}, "Never"), "Running");
  EXPECT_EQ(pod_phase({exited("init", 1)}, {waiting("main", "PodInitializing")}, "Never"),
            "Failed");
  EXPECT_EQ(pod_phase({crash_looping("init", 1)}, {waiting("main", "PodInitializing")}, "Always"),
            "Pending");
}

TEST(ContainerStatusTest, RunningMatchesTheFixtureShape) {
  const json status = container_status(running("stage"), false);
  EXPECT_EQ(status["name"], "stage");
  EXPECT_EQ(status["state"], json({{"running", {{"startedAt", "2026-11-21T23:02:25Z"}}}}));
  EXPECT_EQ(status["lastState"], json::object());
  EXPECT_EQ(status["ready"], true);
  EXPECT_EQ(status["started"], true);
  EXPECT_EQ(status["restartCount"], 0);
  EXPECT_EQ(status["image"], "tessel/stage:0.1.0");
  EXPECT_EQ(status["containerID"], "containerd://1111");
  EXPECT_EQ(status["imageID"].get<std::string>().rfind("docker.io/tessel/stage@sha256:", 0), 0u);
}

TEST(ContainerStatusTest, TerminatedAndWaitingStates) {
  const json done = container_status(exited("main", 2), false);
  EXPECT_EQ(done["state"]["terminated"]["exitCode"], 2);
  EXPECT_EQ(done["state"]["terminated"]["reason"], "Error");
  EXPECT_EQ(done["state"]["terminated"]["startedAt"], "2026-11-21T23:02:25Z");
  EXPECT_EQ(done["state"]["terminated"]["finishedAt"], "2026-11-21T23:02:30Z");
  EXPECT_EQ(done["ready"], false);
  EXPECT_EQ(done["started"], false);
  EXPECT_EQ(done["containerID"], "containerd://1111");

  const json looping = container_status(crash_looping("main", 1), false);
  EXPECT_EQ(looping["state"]["waiting"]["reason"], "CrashLoopBackOff");
  EXPECT_EQ(looping["lastState"]["terminated"]["exitCode"], 1);
  EXPECT_EQ(looping["restartCount"], 1);
  EXPECT_FALSE(looping.contains("containerID"));

  const json creating = container_status(waiting("main", "ContainerCreating"), false);
  EXPECT_EQ(creating["state"], json({{"waiting", {{"reason", "ContainerCreating"}}}}));
  EXPECT_EQ(creating["imageID"], "");
}

TEST(ContainerStatusTest, InitContainerIsReadyOnceItSucceeded) {
  EXPECT_TRUE(container_ready(exited("init", 0), true));
  EXPECT_FALSE(container_ready(exited("init", 1), true));
  EXPECT_FALSE(container_ready(running("init"), true));
  EXPECT_EQ(container_status(exited("init", 0), true)["ready"], true);
}

json find(const json& conditions, const std::string& type) {
  for (const json& condition : conditions) {
    if (condition["type"] == type) return condition;
  }
  return nullptr;
}

TEST(PodConditionsTest, RunningPodIsReadyInKubeletOrder) {
  const json conditions = pod_conditions({}, {running("stage")}, "Running", nullptr, "T1");
  ASSERT_EQ(conditions.size(), 4u);
  EXPECT_EQ(conditions[0]["type"], "Initialized");
  EXPECT_EQ(conditions[1]["type"], "Ready");
  EXPECT_EQ(conditions[2]["type"], "ContainersReady");
  EXPECT_EQ(conditions[3]["type"], "PodScheduled");
  for (const json& condition : conditions) {
    EXPECT_EQ(condition["status"], "True");
    EXPECT_TRUE(condition["lastProbeTime"].is_null());
    EXPECT_EQ(condition["lastTransitionTime"], "T1");
    EXPECT_FALSE(condition.contains("reason"));
  }
}

TEST(PodConditionsTest, UnreadyContainersAreNamedAsTheKubeletDoes) {
  const json conditions =
      pod_conditions({}, {exited("a", 1), running("b"), waiting("c", "ContainerCreating")},
                     "Running", nullptr, "T1");
  const json ready = find(conditions, "Ready");
  EXPECT_EQ(ready["status"], "False");
  EXPECT_EQ(ready["reason"], "ContainersNotReady");
  EXPECT_EQ(ready["message"], "containers with unready status: [a c]");
  EXPECT_EQ(find(conditions, "ContainersReady")["message"],
            "containers with unready status: [a c]");
}

TEST(PodConditionsTest, SucceededPodReportsPodCompleted) {
  const json conditions = pod_conditions({}, {exited("a", 0)}, "Succeeded", nullptr, "T1");
  EXPECT_EQ(find(conditions, "Initialized")["status"], "True");
  EXPECT_EQ(find(conditions, "Initialized")["reason"], "PodCompleted");
  EXPECT_EQ(find(conditions, "Ready")["status"], "False");
  EXPECT_EQ(find(conditions, "Ready")["reason"], "PodCompleted");
  EXPECT_EQ(find(conditions, "ContainersReady")["reason"], "PodCompleted");
}

TEST(PodConditionsTest, IncompleteInitContainersAreNamed) {
  const json conditions = pod_conditions({running("init")}, {waiting("main", "PodInitializing")},
                                         "Pending", nullptr, "T1");
  const json initialized = find(conditions, "Initialized");
  EXPECT_EQ(initialized["status"], "False");
  EXPECT_EQ(initialized["reason"], "ContainersNotInitialized");
  EXPECT_EQ(initialized["message"], "containers with incomplete status: [init]");
}

TEST(PodConditionsTest, TransitionTimeChangesOnlyWithTheStatus) {
  const json first =
      pod_conditions({}, {waiting("a", "ContainerCreating")}, "Pending", nullptr, "T1");
  const json second = pod_conditions({}, {running("a")}, "Running", first, "T2");
  EXPECT_EQ(find(second, "Initialized")["lastTransitionTime"], "T1");
  EXPECT_EQ(find(second, "PodScheduled")["lastTransitionTime"], "T1");
  EXPECT_EQ(find(second, "Ready")["lastTransitionTime"], "T2");
  const json third = pod_conditions({}, {running("a")}, "Running", second, "T3");
  EXPECT_EQ(third, second);
}

TEST(ImageIdTest, NormalisesTheRepositoryAsARuntimeDoes) {
  const std::string busybox = image_id("busybox:1.36");
  EXPECT_EQ(busybox.rfind("docker.io/library/busybox@sha256:", 0), 0u);
  EXPECT_EQ(busybox.size(), std::string("docker.io/library/busybox@sha256:").size() + 64);
  EXPECT_EQ(image_id("busybox:1.36"), busybox);
  EXPECT_NE(image_id("busybox:1.35"), busybox);
  EXPECT_EQ(
      image_id("registry.local:5000/team/app:v1").rfind("registry.local:5000/team/app@sha256:", 0),
      0u);
  EXPECT_EQ(image_id("tessel/stage@sha256:abc"), "docker.io/tessel/stage@sha256:abc");
}

}  // namespace
}  // namespace tessel::testing
