// The gang state of one start attempt: what the pods of its tasklets say, read from pods as the
// process kubelet (and a real kubelet) writes their status.
#include "operator/controller/gang.h"

#include <gtest/gtest.h>

namespace tessel::controller {
namespace {

using nlohmann::json;

// 2 stages x 2 replicas over two members.
std::vector<TaskletPlace> tasklets() {
  return {{0, 0, 0, "member-b", "gpu-b1"},
          {1, 1, 0, "member-a", "gpu-a1"},
          {2, 0, 1, "member-b", "gpu-b2"},
          {3, 1, 1, "member-a", "gpu-a1"}};
}

json pod(const std::string& name, const std::string& phase, int64_t attempt = 2) {
  return {{"metadata",
           {{"name", name},
            {"namespace", "research"},
            {"annotations", {{"tessel.dev/attempt", std::to_string(attempt)}}}}},
          {"status", {{"phase", phase}}}};
}

std::map<std::string, std::vector<json>> all(const std::string& phase) {
  return {{"member-a", {pod("fables-s1-r0", phase), pod("fables-s1-r1", phase)}},
          {"member-b", {pod("fables-s0-r0", phase), pod("fables-s0-r1", phase)}}};
}

TEST(Gang, AllRunning) {
  const GangState state = observe_gang(tasklets(), "fables", all("Running"), 2);
  EXPECT_EQ(state.expected, 4);
  EXPECT_EQ(state.found, 4);
  EXPECT_EQ(state.running, 4);
  EXPECT_EQ(state.succeeded, 0);
  EXPECT_TRUE(state.missing.empty());
  EXPECT_FALSE(state.failed);
  EXPECT_TRUE(state.all_running());
  EXPECT_FALSE(state.all_succeeded());
}

// A failed pod names the node it was bound to; pods bound to a lost node are listed with it,
// the node once.
TEST(Gang, FailedPodsNodeAndPodsOnLostNodes) {
  std::map<std::string, std::vector<json>> pods = all("Running");
  for (auto& [cluster, list] : pods)
    for (json& p : list) p["spec"]["nodeName"] = cluster == "member-a" ? "gpu-a1" : "gpu-b1";
  pods["member-b"][1]["status"] = {{"phase", "Failed"}, {"reason", "Error"}, {"message", "exit 1"}};
  const GangState state =
      observe_gang(tasklets(), "fables", pods, 2, {{"member-a", "gpu-a1"}, {"member-c", "x"}});
  ASSERT_TRUE(state.failed_node.has_value());
  EXPECT_EQ(*state.failed_node, (NodeRef{"member-b", "gpu-b1"}));
  EXPECT_EQ(state.lost, (std::vector<NodeRef>{{"member-a", "gpu-a1"}}));
  EXPECT_EQ(state.on_lost_nodes,
            (std::vector<std::string>{"member-a/fables-s1-r0 on node gpu-a1",
                                      "member-a/fables-s1-r1 on node gpu-a1"}));
  // Unbound, a failed pod is at its tasklet's node.
  pods["member-b"][1].erase("spec");
  EXPECT_EQ(*observe_gang(tasklets(), "fables", pods, 2).failed_node,
            (NodeRef{"member-b", "gpu-b2"}));
}

TEST(Gang, PendingPodsAreFoundButNotRunning) {
  std::map<std::string, std::vector<json>> pods = all("Running");
  pods["member-b"][1] = pod("fables-s0-r1", "Pending");
  const GangState state = observe_gang(tasklets(), "fables", pods, 2);
  EXPECT_EQ(state.found, 4);
  EXPECT_EQ(state.running, 3);
  EXPECT_FALSE(state.failed);
  EXPECT_FALSE(state.all_running());
}

TEST(Gang, AllSucceededAndAnEarlyFinisherIsNotAFailedStart) {
  EXPECT_TRUE(observe_gang(tasklets(), "fables", all("Succeeded"), 2).all_succeeded());
  std::map<std::string, std::vector<json>> pods = all("Running");
  pods["member-a"][0] = pod("fables-s1-r0", "Succeeded");
  const GangState state = observe_gang(tasklets(), "fables", pods, 2);
  EXPECT_EQ(state.running, 3);
  EXPECT_EQ(state.succeeded, 1);
  EXPECT_TRUE(state.all_running());
  EXPECT_FALSE(state.all_succeeded());
}

// The stage container's termination message of each Succeeded pod, in rank order: other
// containers' messages are not the stage's, and a pod with none gives "".
TEST(Gang, SucceededPodsGiveTheStagesTerminationMessagesInRankOrder) {
  std::map<std::string, std::vector<json>> pods = all("Succeeded");
  const auto terminated = [](const std::string& container, const std::string& message) {
    return json{{"name", container},
                {"state", {{"terminated", {{"exitCode", 0}, {"message", message}}}}}};
  };
  pods["member-b"][0]["status"]["containerStatuses"] = {terminated("stage", "rank 0")};
  pods["member-a"][0]["status"]["containerStatuses"] = {terminated("sidecar", "not mine"),
                                                        terminated("stage", "rank 1")};
  pods["member-b"][1]["status"]["containerStatuses"] = {terminated("sidecar", "not mine")};
  pods["member-a"][1]["status"]["containerStatuses"] = {terminated("stage", "rank 3")};
  const GangState state = observe_gang(tasklets(), "fables", pods, 2);
  EXPECT_EQ(state.termination_messages,
            (std::vector<std::string>{"rank 0", "rank 1", "", "rank 3"}));
  EXPECT_TRUE(observe_gang(tasklets(), "fables", all("Running"), 2).termination_messages.empty());
}

TEST(Gang, APodTheKubeletRejectedForGpusFailsTheGang) {
  std::map<std::string, std::vector<json>> pods = all("Running");
  // As the kubelet's admission (and the process kubelet) writes it.
  json rejected = pod("fables-s1-r1", "Failed");
  rejected["status"]["reason"] = "OutOfnvidia.com/gpu";
  rejected["status"]["message"] =
      "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: "
      "8, capacity: 8";
  pods["member-a"][1] = rejected;
  const GangState state = observe_gang(tasklets(), "fables", pods, 2);
  EXPECT_EQ(state.found, 4);
  EXPECT_EQ(state.running, 3);
  ASSERT_TRUE(state.failed);
  EXPECT_EQ(*state.failed,
            "member-a/fables-s1-r1: OutOfnvidia.com/gpu: Pod was rejected: Node didn't have enough "
            "resource: nvidia.com/gpu, requested: 1, used: 8, capacity: 8");
  EXPECT_FALSE(state.all_running());
}

TEST(Gang, TheFirstFailedPodInRankOrderIsNamedWithItsContainersExit) {
  std::map<std::string, std::vector<json>> pods = all("Running");
  json evicted = pod("fables-s1-r1", "Failed");  // rank 3
  evicted["status"]["reason"] = "Evicted";
  evicted["status"]["message"] = "The node was low on resource: memory.";
  pods["member-a"][1] = evicted;
  json crashed = pod("fables-s0-r1", "Failed");  // rank 2
  crashed["status"]["containerStatuses"] = json::parse(R"([{"name": "stage",
      "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}])");
  pods["member-b"][1] = crashed;
  const GangState state = observe_gang(tasklets(), "fables", pods, 2);
  ASSERT_TRUE(state.failed);
  EXPECT_EQ(*state.failed, "member-b/fables-s0-r1: Error: container stage exited with code 3");
}

TEST(Gang, AMissingPodIsNamed) {
  std::map<std::string, std::vector<json>> pods = all("Running");
  pods["member-b"].erase(pods["member-b"].begin());  // fables-s0-r0
  const GangState state = observe_gang(tasklets(), "fables", pods, 2);
  EXPECT_EQ(state.found, 3);
  EXPECT_EQ(state.missing, std::vector<std::string>{"fables-s0-r0"});
  EXPECT_FALSE(state.all_running());

  // A member with none of the job's pods, and a pod in the wrong member, are missing too.
  pods.erase("member-a");
  pods["member-b"].push_back(pod("fables-s1-r0", "Running"));
  const GangState none_in_a = observe_gang(tasklets(), "fables", pods, 2);
  EXPECT_EQ(none_in_a.missing,
            (std::vector<std::string>{"fables-s0-r0", "fables-s1-r0", "fables-s1-r1"}));
}

// A pod that Succeeded has done its work: its node lost afterwards loses nothing of the job.
TEST(Gang, ASucceededPodIsNotLostWithItsNode) {
  std::map<std::string, std::vector<json>> pods = all("Running");
  for (auto& [cluster, list] : pods)
    for (json& p : list) p["spec"]["nodeName"] = cluster == "member-a" ? "gpu-a1" : "gpu-b1";
  pods["member-a"][0]["status"]["phase"] = "Succeeded";
  const GangState one_running =
      observe_gang(tasklets(), "fables", pods, 2, {{"member-a", "gpu-a1"}});
  EXPECT_EQ(one_running.lost, (std::vector<NodeRef>{{"member-a", "gpu-a1"}}));
  EXPECT_EQ(one_running.on_lost_nodes,
            std::vector<std::string>{"member-a/fables-s1-r1 on node gpu-a1"});
  pods["member-a"][1]["status"]["phase"] = "Succeeded";
  const GangState both_done = observe_gang(tasklets(), "fables", pods, 2, {{"member-a", "gpu-a1"}});
  EXPECT_TRUE(both_done.lost.empty());
  EXPECT_TRUE(both_done.on_lost_nodes.empty());
  EXPECT_TRUE(both_done.all_running());
}

TEST(Gang, PodsOfAnotherAttemptDoNotCount) {
  std::map<std::string, std::vector<json>> pods = all("Running");
  json old = pod("fables-s1-r0", "Failed", 1);  // the failed attempt's pod, not yet gone
  old["status"]["reason"] = "OutOfnvidia.com/gpu";
  pods["member-a"][0] = old;
  const GangState state = observe_gang(tasklets(), "fables", pods, 2);
  EXPECT_EQ(state.found, 3);
  EXPECT_EQ(state.missing, std::vector<std::string>{"fables-s1-r0"});
  EXPECT_FALSE(state.failed);
  // Seen from attempt 1, only that pod is its own.
  const GangState first = observe_gang(tasklets(), "fables", pods, 1);
  EXPECT_EQ(first.found, 1);
  EXPECT_TRUE(first.failed);
}

TEST(Gang, APodBeingDeletedIsNotRunning) {
  std::map<std::string, std::vector<json>> pods = all("Running");
  pods["member-a"][0]["metadata"]["deletionTimestamp"] = "2026-11-26T05:00:00Z";
  const GangState state = observe_gang(tasklets(), "fables", pods, 2);
  EXPECT_EQ(state.found, 4);
  EXPECT_EQ(state.running, 3);
  EXPECT_FALSE(state.all_running());
}

TEST(Gang, NoTaskletsIsNeitherRunningNorSucceeded) {
  const GangState state = observe_gang({}, "fables", all("Running"), 2);
  EXPECT_FALSE(state.all_running());
  EXPECT_FALSE(state.all_succeeded());
}

}  // namespace
}  // namespace tessel::controller
