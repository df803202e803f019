#include "tests/support/api_patch.h"

#include <gtest/gtest.h>

#include "tests/kube/fixtures.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using tessel::kube::testing::fixture;

json pod() {
  return json::parse(R"({
    "metadata": {"name": "p", "finalizers": ["a"], "labels": {"x": "1"}},
    "spec": {"containers": [
      {"name": "stage", "image": "i:1", "args": ["--a"],
       "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
       "ports": [{"containerPort": 29500, "protocol": "TCP"}]},
      {"name": "sidecar", "image": "s:1"}],
     "tolerations": [{"key": "t1"}]},
    "status": {"phase": "Pending",
               "conditions": [{"type": "Ready", "status": "False"},
                              {"type": "Initialized", "status": "True"}]}
  })");
}

TEST(MergePatch, MergesObjectsReplacesListsAndNullRemoves) {
  const json patched =
      merge_patch(pod(), json::parse(R"({"metadata": {"labels": {"x": null, "y": "2"}},
                             "status": {"conditions": [{"type": "Ready", "status": "True"}]}})"));
  EXPECT_EQ(patched["metadata"]["labels"], json({{"y", "2"}}));
  EXPECT_EQ(patched["status"]["conditions"].size(), 1u);
  EXPECT_EQ(patched["status"]["phase"], "Pending");
}

TEST(JsonPatch, AppliesOperationsInOrder) {
  const json patched = json_patch(pod(), json::parse(R"([
      {"op": "test", "path": "/status/phase", "value": "Pending"},
      {"op": "replace", "path": "/status/phase", "value": "Running"},
      {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
      {"op": "remove", "path": "/metadata/labels/x"},
      {"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/name"},
      {"op": "move", "from": "/spec/tolerations", "path": "/spec/moved"}])"));
  EXPECT_EQ(patched["status"]["phase"], "Running");
  EXPECT_EQ(patched["metadata"]["finalizers"], json({"a", "b"}));
  EXPECT_EQ(patched["metadata"]["labels"], json({{"name", "p"}}));
  EXPECT_FALSE(patched["spec"].contains("tolerations"));
  EXPECT_EQ(patched["spec"]["moved"][0]["key"], "t1");
}

TEST(JsonPatch, AFailedTestAppliesNothing) {
  // fixture 422-json-patch-test-failed.json
  const json request = fixture("422-json-patch-test-failed.json")["request"]["body"];
  const json target = {{"spec", {{"replicas", 4}}}};
  EXPECT_THROW(json_patch(target, request), PatchApplyError);
  EXPECT_THROW(json_patch(target, json::parse(R"([{"op": "remove", "path": "/spec/x"}])")),
               PatchApplyError);
}

TEST(JsonPatch, RefusesMalformedDocuments) {
  EXPECT_THROW(json_patch(pod(), json::object()), PatchFormatError);
  EXPECT_THROW(json_patch(pod(), json::parse(R"([{"op": "frobnicate", "path": "/a"}])")),
               PatchFormatError);
  EXPECT_THROW(json_patch(pod(), json::parse(R"([{"path": "/a"}])")), PatchFormatError);
}

TEST(StrategicMergePatch, MergesContainersEnvAndPortsByTheirKeys) {
  const json patched = strategic_merge_patch("Pod", pod(), json::parse(R"({"spec": {"containers": [
      {"name": "stage", "image": "i:2",
       "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
       "ports": [{"containerPort": 29501}]}]}})"));
  const json& containers = patched["spec"]["containers"];
  ASSERT_EQ(containers.size(), 2u);
  EXPECT_EQ(containers[0]["image"], "i:2");
  EXPECT_EQ(containers[0]["args"], json({"--a"}));
  EXPECT_EQ(containers[0]["env"],
            json::parse(R"([{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                            {"name": "C", "value": "4"}])"));
  EXPECT_EQ(containers[0]["ports"].size(), 2u);
  EXPECT_EQ(containers[1]["name"], "sidecar");
}

TEST(StrategicMergePatch, ConditionsMergeByTypeAsTheKubeletPatchesThem) {
  // fixture 200-pod-status-patch-running.json: conditions merged by type
  const json patched =
      strategic_merge_patch("Pod", pod(), json::parse(R"({"status": {"phase": "Running",
                                 "conditions": [{"type": "Ready", "status": "True"},
                                                {"type": "ContainersReady", "status": "True"}]}})"));
  const json& conditions = patched["status"]["conditions"];
  ASSERT_EQ(conditions.size(), 3u);
  EXPECT_EQ(conditions[0], json({{"type", "Ready"}, {"status", "True"}}));
  EXPECT_EQ(conditions[1]["type"], "Initialized");
  EXPECT_EQ(conditions[2]["type"], "ContainersReady");
}

TEST(StrategicMergePatch, NodeStatusFixtureMergesAddressesAndConditions) {
  const json case_ = fixture("200-node-status-patch-ready.json");
  const json patch = case_["request"]["body"];
  json node = case_["response"]["body"];
  node.erase("status");
  const json patched = strategic_merge_patch("Node", node, patch);
  EXPECT_EQ(patched["status"]["addresses"], case_["response"]["body"]["status"]["addresses"]);
  EXPECT_EQ(patched["status"]["conditions"], case_["response"]["body"]["status"]["conditions"]);
}

TEST(StrategicMergePatch, HonoursDirectives) {
  const json patched = strategic_merge_patch("Pod", pod(), json::parse(R"({
      "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]},
      "spec": {"containers": [{"name": "sidecar", "$patch": "delete"}],
               "tolerations": [{"key": "t2"}]},
      "status": {"$patch": "replace", "phase": "Failed"}})"));
  EXPECT_EQ(patched["metadata"]["finalizers"], json({"b"}));
  ASSERT_EQ(patched["spec"]["containers"].size(), 1u);
  EXPECT_EQ(patched["spec"]["containers"][0]["name"], "stage");
  EXPECT_EQ(patched["spec"]["tolerations"], json::parse(R"([{"key": "t2"}])"));
  EXPECT_EQ(patched["status"], json({{"phase", "Failed"}}));
}

TEST(StrategicMergePatch, SetElementOrderReordersAMergedList) {
  const json patched = strategic_merge_patch("Pod", pod(), json::parse(R"({"spec": {
      "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "stage"}],
      "containers": [{"name": "stage", "image": "i:3"}]}})"));
  EXPECT_EQ(patched["spec"]["containers"][0]["name"], "sidecar");
  EXPECT_EQ(patched["spec"]["containers"][1]["image"], "i:3");
}

TEST(StrategicMergePatch, RefusesWhatItCannotDo) {
  EXPECT_THROW(strategic_merge_patch("Pod", pod(), json::parse(R"({"spec": {"$retainKeys": []}})")),
               PatchFormatError);
  EXPECT_THROW(strategic_merge_patch("Pod", pod(),
                                     json::parse(R"({"spec": {"containers": [{"image": "x"}]}})")),
               PatchFormatError);
  EXPECT_THROW(strategic_merge_patch("Pod", pod(), json::array()), PatchFormatError);
}

}  // namespace
}  // namespace tessel::testing
