// managedFields and server-side apply against the captured kube-apiserver v1.26 fixtures: each
// test replays one captured write on the state before it and compares the recorded fields.
#include "tests/support/managed_fields.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <string>

#include "tests/kube/fixtures.h"
#include "tests/support/managed_fields_set.h"
#include "tests/support/managed_fields_walk.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
using kube::testing::fixture;

json response_body(const std::string& name) { return fixture(name)["response"]["body"]; }

// A plain-YAML apply body (what kubectl sends) as JSON: unquoted scalars become numbers,
// booleans and null where YAML 1.2's core schema says so.
json yaml_to_json(const YAML::Node& node) {
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& kv : node) out[kv.first.as<std::string>()] = yaml_to_json(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (const auto& item : node) out.push_back(yaml_to_json(item));
    return out;
  }
  if (node.IsNull()) return nullptr;
  const std::string text = node.as<std::string>();
  if (node.Tag() != "!") {
    if (text == "true" || text == "false") return text == "true";
    if (!text.empty() && text.find_first_not_of("-0123456789") == std::string::npos) {
      return std::stoll(text);
    }
  }
  return text;
}

json request_apply_body(const std::string& name) {
  const json body = fixture(name)["request"]["body"];
  return body.is_string() ? yaml_to_json(YAML::Load(body.get<std::string>())) : body;
}

// The managedFields of an object without their times, sorted by manager: the tests mix the
// captured times with the present time, which would decide the order of entries otherwise.
json without_times(json managed_fields) {
  for (auto& entry : managed_fields) entry.erase("time");
  std::vector<json> entries(managed_fields.begin(), managed_fields.end());
  std::sort(entries.begin(), entries.end(),
            [](const json& a, const json& b) { return a.dump() < b.dump(); });
  return entries;
}

json managed_fields(const json& object) {
  return without_times(object["metadata"].value("managedFields", json::array()));
}

json without_managed_fields(json object) {
  object["metadata"].erase("managedFields");
  return object;
}

// ---------------------------------------------------------------------------------------------
// Update entries

TEST(RecordUpdate, CustomResourceCreateOwnsEverySetFieldWithMapMarkers) {
  const json stored = response_body("201-create-trainingjob.json");
  json created = without_managed_fields(stored);
  record_update(created, nullptr, "tessel-operator", "");
  EXPECT_EQ(managed_fields(created), managed_fields(stored));
  EXPECT_EQ(created["metadata"]["managedFields"][0]["operation"], "Update");
  EXPECT_FALSE(created["metadata"]["managedFields"][0]["time"].get<std::string>().empty());
}

TEST(RecordUpdate, FinalizersAreASet) {
  const json stored = response_body("201-create-with-finalizer.json");
  json created = without_managed_fields(stored);
  record_update(created, nullptr, "tessel-operator", "");
  EXPECT_EQ(managed_fields(created), managed_fields(stored));
}

TEST(RecordUpdate, StatusPutRecordsTheIgnoredLabelAsKubeApiserverDoes) {
  const json before = response_body("200-update-spec-generation-bump.json");
  json request = fixture("200-status-update-put.json")["request"]["body"];
  record_update(request, before, "tessel-operator", "status");
  EXPECT_EQ(managed_fields(request), managed_fields(response_body("200-status-update-put.json")));
}

TEST(RecordUpdate, StatusMergePatchAddsToTheStatusEntry) {
  const json before = response_body("200-status-update-put.json");
  json patched = before;
  patched.merge_patch(fixture("200-status-merge-patch.json")["request"]["body"]);
  record_update(patched, before, "tessel-operator", "status");
  EXPECT_EQ(managed_fields(patched), managed_fields(response_body("200-status-merge-patch.json")));
}

TEST(RecordUpdate, MainResourceWriteDoesNotOwnStatus) {
  const json before = response_body("200-status-merge-patch.json");
  json request = fixture("200-update-main-ignores-status.json")["request"]["body"];
  record_update(request, before, "tessel-operator", "");
  // Only status changed, and a main-resource write ignores it: nothing new is recorded, and the
  // given managedFields are the live ones, unchanged (times included).
  EXPECT_EQ(request["metadata"]["managedFields"], before["metadata"]["managedFields"]);
}

TEST(RecordUpdate, LabelPatchAddsAnnotationOwnership) {
  const json before = response_body("200-patch-main-status-ignored.json");
  json patched = before;
  patched.merge_patch(fixture("200-patch-labels-no-generation-bump.json")["request"]["body"]);
  record_update(patched, before, "tessel-operator", "");
  EXPECT_EQ(managed_fields(patched),
            managed_fields(response_body("200-patch-labels-no-generation-bump.json")));
}

TEST(RecordUpdate, PodCreateComparesAgainstTheTypedZeroPod) {
  // The object as kube-apiserver's field manager saw it: decoded with defaults, before the
  // admission plugins (service account, priority, tolerations) and the create strategy (status).
  json pod = without_managed_fields(response_body("201-create-pod-with-nodename.json"));
  for (const char* admitted :
       {"serviceAccountName", "serviceAccount", "tolerations", "priority", "preemptionPolicy"}) {
    pod["spec"].erase(admitted);
  }
  pod["status"] = json::object();
  record_update(pod, nullptr, "tessel-operator", "");
  EXPECT_EQ(managed_fields(pod),
            managed_fields(response_body("201-create-pod-with-nodename.json")));
}

TEST(RecordUpdate, PodStatusPatchesKeyConditionsByType) {
  const json created = response_body("201-create-pod-with-nodename.json");
  json running = without_managed_fields(response_body("200-pod-status-patch-running.json"));
  record_update(running, created, "tessel-operator", "status");
  EXPECT_EQ(managed_fields(running),
            managed_fields(response_body("200-pod-status-patch-running.json")));

  // A JSON merge patch replaces the conditions list: the dropped conditions lose their owner.
  json ready_false = running;
  ready_false.merge_patch(
      fixture("200-pod-status-merge-patch-ready-false.json")["request"]["body"]);
  record_update(ready_false, running, "tessel-operator", "status");
  EXPECT_EQ(managed_fields(ready_false),
            managed_fields(response_body("200-pod-status-merge-patch-ready-false.json")));
}

TEST(RecordUpdate, NodeAnnotationsOfSeveralManagers) {
  json request = fixture("201-create-node.json")["request"]["body"];
  record_update(request, nullptr, "tessel-operator", "");
  EXPECT_EQ(managed_fields(request), managed_fields(response_body("201-create-node.json")));

  const json node = response_body("201-create-node.json");  // stored with its zero status

  json ttl = node;  // what kube-controller-manager did in between (not captured)
  ttl["metadata"]["annotations"] = {{"node.alpha.kubernetes.io/ttl", "0"}};
  record_update(ttl, node, "kube-controller-manager", "");

  json ready = without_managed_fields(response_body("200-node-status-patch-ready.json"));
  record_update(ready, ttl, "tessel-operator", "status");
  EXPECT_EQ(managed_fields(ready),
            managed_fields(response_body("200-node-status-patch-ready.json")));

  json annotated = ready;
  annotated.merge_patch(fixture("200-node-annotate-merge-patch.json")["request"]["body"]);
  record_update(annotated, ready, "tessel-prober", "");
  EXPECT_EQ(managed_fields(annotated),
            managed_fields(response_body("200-node-annotate-merge-patch.json")));

  json removed = annotated;
  removed.merge_patch(fixture("200-node-remove-annotation-merge-patch.json")["request"]["body"]);
  record_update(removed, annotated, "tessel-prober", "");
  EXPECT_EQ(managed_fields(removed),
            managed_fields(response_body("200-node-remove-annotation-merge-patch.json")));
}

TEST(RecordUpdate, NoChangeKeepsTheTime) {
  const json before = response_body("201-create-trainingjob.json");
  json same = without_managed_fields(before);
  record_update(same, before, "someone-else", "");
  EXPECT_EQ(same["metadata"]["managedFields"], before["metadata"]["managedFields"]);
}

TEST(RecordUpdate, GivenManagedFieldsReplaceOrResetTheLiveOnes) {
  const json before = response_body("201-create-trainingjob.json");
  json reset = before;
  reset["metadata"]["managedFields"] = json::array();
  record_update(reset, before, "tessel-operator", "");
  EXPECT_FALSE(reset["metadata"].contains("managedFields"));

  json moved = before;
  moved["metadata"]["managedFields"][0]["manager"] = "kubectl";
  record_update(moved, before, "tessel-operator", "");
  EXPECT_EQ(moved["metadata"]["managedFields"][0]["manager"], "kubectl");

  // Through a subresource the request cannot touch managedFields.
  json through_status = moved;
  record_update(through_status, before, "tessel-operator", "status");
  EXPECT_EQ(through_status["metadata"]["managedFields"], before["metadata"]["managedFields"]);
}

TEST(RecordUpdate, EntriesAreOrderedByOperationTimeAndManager) {
  json object = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", {{"name", "c"}}},
                 {"data", {{"b", "2"}}}};
  object["metadata"]["managedFields"] =
      json::array({{{"apiVersion", "v1"},
                    {"fieldsType", "FieldsV1"},
                    {"fieldsV1", {{"f:data", {{"f:b", json::object()}}}}},
                    {"manager", "zeta"},
                    {"operation", "Update"},
                    {"time", "2020-01-01T00:00:00Z"}},
                   {{"apiVersion", "v1"},
                    {"fieldsType", "FieldsV1"},
                    {"fieldsV1", {{"f:data", {{"f:c", json::object()}}}}},
                    {"manager", "alpha"},
                    {"operation", "Apply"},
                    {"time", "2030-01-01T00:00:00Z"}}});
  json updated = object;
  updated["metadata"].erase("managedFields");
  updated["data"]["a"] = "1";
  record_update(updated, object, "middle", "");
  const json& entries = updated["metadata"]["managedFields"];
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0]["manager"], "alpha");  // Apply sorts before Update
  EXPECT_EQ(entries[1]["manager"], "zeta");   // older
  EXPECT_EQ(entries[2]["manager"], "middle");
}

// ---------------------------------------------------------------------------------------------
// Server-side apply

class ServerSideApply : public ::testing::Test {
 protected:
  // The object as the fixture's apply created it (schema defaults filled in by the core).
  json created() {
    ApplyResult result = server_side_apply(nullptr, request_apply_body("201-ssa-apply-create.json"),
                                           "kubectl", false, "");
    EXPECT_TRUE(result.conflicts.empty());
    result.object["spec"]["stages"] = 1;
    return result.object;
  }
};

TEST_F(ServerSideApply, CreateOwnsExactlyTheAppliedFields) {
  const json object = created();
  const json expected = response_body("201-ssa-apply-create.json");
  EXPECT_EQ(managed_fields(object), managed_fields(expected));
  EXPECT_EQ(object["spec"], expected["spec"]);
  EXPECT_FALSE(object.contains("status"));
}

TEST_F(ServerSideApply, ConflictWithAnUpdaterNamesItAsKubeApiserverDoes) {
  const json live = created();
  json updated = live;  // tessel-operator changed spec.replicas between the captures
  updated["spec"]["replicas"] = 2;
  record_update(updated, live, "tessel-operator", "");

  const ApplyResult result = server_side_apply(
      updated, request_apply_body("409-ssa-apply-conflict.json"), "kubectl", false, "");
  ASSERT_EQ(result.conflicts.size(), 1u);
  EXPECT_EQ(result.conflicts[0],
            "conflict with \"tessel-operator\" using tessel.dev/v1alpha1: .spec.replicas");
  EXPECT_EQ(result.conflict_status, response_body("409-ssa-apply-conflict.json"));
  EXPECT_TRUE(result.object.is_null());

  const ApplyResult forced = server_side_apply(
      updated, request_apply_body("200-ssa-apply-force.json"), "kubectl", true, "");
  EXPECT_TRUE(forced.conflicts.empty());
  EXPECT_EQ(managed_fields(forced.object),
            managed_fields(response_body("200-ssa-apply-force.json")));
  EXPECT_EQ(forced.object["spec"], response_body("200-ssa-apply-force.json")["spec"]);
}

TEST_F(ServerSideApply, SameValueIsSharedNotAConflict) {
  const json live = created();
  const ApplyResult result = server_side_apply(
      live, request_apply_body("201-ssa-apply-create.json"), "other-applier", false, "");
  ASSERT_TRUE(result.conflicts.empty());
  const json entries = managed_fields(result.object);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0]["fieldsV1"], entries[1]["fieldsV1"]);
}

TEST_F(ServerSideApply, StatusApplyThroughTheSubresource) {
  const json live = response_body("200-ssa-apply-force.json");
  const ApplyResult result = server_side_apply(
      live, request_apply_body("200-ssa-status-apply.json"), "tessel-operator", true, "status");
  const json expected = response_body("200-ssa-status-apply.json");
  EXPECT_EQ(managed_fields(result.object), managed_fields(expected));
  EXPECT_EQ(result.object["status"], expected["status"]);
}

TEST_F(ServerSideApply, FieldsNoLongerAppliedAreRemovedUnlessSomeoneElseOwnsThem) {
  json applied = request_apply_body("201-ssa-apply-create.json");
  applied["metadata"]["labels"] = {{"a", "1"}, {"b", "2"}};
  json live = server_side_apply(nullptr, applied, "kubectl", false, "").object;

  json updated = live;  // another manager takes label b over
  updated["metadata"]["labels"]["b"] = "3";
  record_update(updated, live, "labeller", "");

  applied["metadata"].erase("labels");
  applied["spec"].erase("schedule");
  const json result = server_side_apply(updated, applied, "kubectl", true, "").object;
  EXPECT_EQ(result["metadata"]["labels"], json({{"b", "3"}}));
  EXPECT_FALSE(result["spec"].contains("schedule"));
  EXPECT_EQ(result["spec"]["model"], "gpt3-1.3b");
}

TEST_F(ServerSideApply, KeyedListsMergeByKeyAndAtomicListsAreReplaced) {
  const json live_pod = response_body("201-create-pod-with-nodename.json");
  json applied = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "gpt-a-s0-r0"}, {"namespace", "default"}}},
      {"spec",
       {{"containers",
         json::array({{{"name", "stage"},
                       {"env", json::array({{{"name", "EXTRA"}, {"value", "1"}}})}}})}}}};
  const ApplyResult result = server_side_apply(live_pod, applied, "tessel-operator", true, "");
  const json& container = result.object["spec"]["containers"][0];
  ASSERT_EQ(container["env"].size(), 2u);
  EXPECT_EQ(container["env"][0]["name"], "TESSEL_JOB");
  EXPECT_EQ(container["env"][1]["name"], "EXTRA");
  EXPECT_EQ(container["image"], "tessel/stage:0.1.0");

  // args is atomic: applying it takes the whole list from the Update manager.
  applied["spec"]["containers"][0]["args"] = json::array({"--x"});
  const ApplyResult without_force = server_side_apply(live_pod, applied, "applier", false, "");
  ASSERT_EQ(without_force.conflicts.size(), 1u);
  EXPECT_EQ(without_force.conflicts[0],
            "conflict with \"tessel-operator\" using v1: .spec.containers[name=\"stage\"].args");
}

TEST_F(ServerSideApply, SeveralConflictsAreGroupedByManager) {
  json live = created();
  json updated = live;
  updated["spec"]["replicas"] = 2;
  updated["spec"]["model"] = "other";
  record_update(updated, live, "tessel-operator", "");
  json applied = request_apply_body("409-ssa-apply-conflict.json");
  applied["spec"]["model"] = "third";
  const ApplyResult result = server_side_apply(updated, applied, "kubectl", false, "");
  ASSERT_EQ(result.conflicts.size(), 2u);
  EXPECT_EQ(result.conflict_status["message"],
            "Apply failed with 2 conflicts: conflicts with \"tessel-operator\" using "
            "tessel.dev/v1alpha1:\n- .spec.model\n- .spec.replicas");
  EXPECT_EQ(result.conflict_status["details"]["causes"].size(), 2u);
}

TEST_F(ServerSideApply, RejectsManagedFieldsAndAnotherVersion) {
  json applied = request_apply_body("201-ssa-apply-create.json");
  applied["metadata"]["managedFields"] = json::array();
  EXPECT_THROW(server_side_apply(nullptr, applied, "kubectl", false, ""), std::invalid_argument);

  json other_version = request_apply_body("201-ssa-apply-create.json");
  other_version["apiVersion"] = "tessel.dev/v1";
  try {
    server_side_apply(created(), other_version, "kubectl", false, "");
    FAIL() << "expected a rejection";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "Incorrect version specified in apply patch. Specified patch version: "
                 "tessel.dev/v1, expected: tessel.dev/v1alpha1");
  }
}

TEST_F(ServerSideApply, KubectlKeepsTheClientSideAnnotationInStep) {
  json live = created();
  live["metadata"]["annotations"] = {
      {"kubectl.kubernetes.io/last-applied-configuration", "{\"old\":true}\n"}};
  const json applied = request_apply_body("409-ssa-apply-conflict.json");
  const json result = server_side_apply(live, applied, "kubectl", true, "").object;
  const std::string annotation =
      result["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"];
  EXPECT_EQ(json::parse(annotation), applied);
  EXPECT_EQ(annotation.back(), '\n');
}

TEST_F(ServerSideApply, CustomResourceDefinitionListTypesAreHonoured) {
  const json crd_version = {{"name", "v1"},
                            {"schema",
                             {{"openAPIV3Schema",
                               {{"type", "object"},
                                {"properties",
                                 {{"spec",
                                   {{"type", "object"},
                                    {"properties",
                                     {{"workers",
                                       {{"type", "array"},
                                        {"x-kubernetes-list-type", "map"},
                                        {"x-kubernetes-list-map-keys", {"name"}},
                                        {"items",
                                         {{"type", "object"},
                                          {"properties",
                                           {{"name", {{"type", "string"}}},
                                            {"size", {{"type", "integer"}}}}}}}}}}}}}}}}}}}};
  const MergeTypes types = MergeTypes::for_crd_version(crd_version);
  const json live = {{"apiVersion", "x.dev/v1"},
                     {"kind", "W"},
                     {"metadata", {{"name", "w"}}},
                     {"spec", {{"workers", json::array({{{"name", "a"}, {"size", 1}}})}}}};
  const json applied = {{"apiVersion", "x.dev/v1"},
                        {"kind", "W"},
                        {"metadata", {{"name", "w"}}},
                        {"spec", {{"workers", json::array({{{"name", "b"}, {"size", 2}}})}}}};
  const json merged = server_side_apply(live, applied, "m", false, "", types).object;
  EXPECT_EQ(merged["spec"]["workers"].size(), 2u);
  EXPECT_TRUE(merged["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:workers"].contains(
      "k:{\"name\":\"b\"}"));
  // Without the CRD's list type the list is atomic.
  const json replaced = server_side_apply(live, applied, "m", false, "").object;
  EXPECT_EQ(replaced["spec"]["workers"], applied["spec"]["workers"]);
}

// ---------------------------------------------------------------------------------------------
// The small pieces

TEST(DefaultManager, IsTheUserAgentUpToTheFirstSlash) {
  EXPECT_EQ(default_manager("tessel-operator/0.1.0 (linux/amd64)"), "tessel-operator");
  EXPECT_EQ(default_manager("kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07"), "kubectl");
  EXPECT_EQ(default_manager("Go-http-client/1.1"), "Go-http-client");
  EXPECT_EQ(default_manager(""), "");
  EXPECT_EQ(default_manager("no\tslash"), "noslash");  // unprintable characters are dropped
  EXPECT_EQ(default_manager(std::string(200, 'a')).size(), 128u);
}

TEST(MissingFieldManager, MatchesTheCapturedStatus) {
  EXPECT_EQ(missing_field_manager_status(), response_body("422-ssa-missing-fieldmanager.json"));
}

TEST(FieldSet, RoundTripsFieldsV1AndNamesPaths) {
  const json fields = response_body(
      "201-create-pod-with-nodename.json")["metadata"]["managedFields"][0]["fieldsV1"];
  const FieldSet set = FieldSet::from_fields_v1(fields);
  EXPECT_EQ(set.to_fields_v1(), fields);
  EXPECT_TRUE(set.has({"f:spec", "f:containers", "k:{\"name\":\"stage\"}", "f:image"}));
  EXPECT_EQ(path_string({"f:spec", "f:containers", "k:{\"name\":\"stage\"}", "f:ports",
                         "k:{\"containerPort\":29500,\"protocol\":\"TCP\"}"}),
            ".spec.containers[name=\"stage\"].ports[containerPort=29500,protocol=\"TCP\"]");
  EXPECT_EQ(path_string({"f:metadata", "f:finalizers", "v:\"a\""}), ".metadata.finalizers[=\"a\"]");
  EXPECT_THROW(FieldSet::from_fields_v1({{"x:bad", json::object()}}), std::invalid_argument);
  EXPECT_THROW(FieldSet::from_fields_v1(json::array()), std::invalid_argument);
}

}  // namespace
}  // namespace tessel::testing
