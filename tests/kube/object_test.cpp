#include "kube/object.h"

#include <gtest/gtest.h>

#include "fixtures.h"

#include <nlohmann/json.hpp>

namespace tessel::kube {
namespace {

using nlohmann::json;
using namespace std::chrono;

using testing::fixture;
using testing::kFixtures;

json response_body(const std::string& name) { return fixture(name).at("response").at("body"); }

std::vector<std::string> names_of(const json& items) {
  std::vector<std::string> names;
  for (const json& item : items) names.push_back(object_name(item));
  return names;
}

// The decoded value of one query parameter of a fixture's request path.
std::string query_parameter(const std::string& request_path, const std::string& key) {
  const auto start = request_path.find(key + "=");
  if (start == std::string::npos) return {};
  std::string raw = request_path.substr(start + key.size() + 1);
  raw = raw.substr(0, raw.find('&'));
  std::string decoded;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size()) {
      decoded += static_cast<char>(std::stoi(raw.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      decoded += raw[i];
    }
  }
  return decoded;
}

// --- metadata -------------------------------------------------------------------------------

TEST(ObjectTest, MetadataOfAFetchedTrainingJob) {
  const json job = response_body("200-get-trainingjob.json");
  EXPECT_EQ(object_name(job), "gpt-a");
  EXPECT_EQ(object_namespace(job), "default");
  EXPECT_EQ(object_uid(job), "9cb914b6-62d7-49e5-81a5-6df8560286df");
  EXPECT_EQ(object_resource_version(job), "340");
  EXPECT_EQ(object_generation(job), 1);
  EXPECT_EQ(object_key(job), "default/gpt-a");
  EXPECT_FALSE(is_being_deleted(job));
  EXPECT_EQ(object_labels(job), (std::map<std::string, std::string>{{"tessel.dev/team", "llm"}}));
  EXPECT_EQ(get_label(job, "tessel.dev/team"), "llm");
  EXPECT_EQ(get_label(job, "absent"), std::nullopt);
  EXPECT_TRUE(object_annotations(job).empty());
}

TEST(ObjectTest, ClusterScopedObjectHasNoNamespace) {
  const json cluster = response_body("200-get-cluster-scoped-cr.json");
  EXPECT_EQ(object_namespace(cluster), "");
  EXPECT_EQ(object_key(cluster), "edge-eu");
}

TEST(ObjectTest, TerminatingObjectIsBeingDeleted) {
  EXPECT_TRUE(is_being_deleted(response_body("200-get-terminating-with-finalizer.json")));
}

TEST(ObjectTest, MissingMetadataReadsAsEmpty) {
  const json empty = json::object();
  EXPECT_EQ(object_name(empty), "");
  EXPECT_EQ(object_generation(empty), 0);
  EXPECT_TRUE(object_labels(json{{"metadata", {{"labels", nullptr}}}}).empty());
  EXPECT_TRUE(object_finalizers(empty).empty());
}

// --- labels and annotations -----------------------------------------------------------------

TEST(ObjectTest, LabelsAndAnnotationsSetAndRemove) {
  json job = response_body("200-get-trainingjob.json");
  set_label(job, "app", "x");
  EXPECT_EQ(get_label(job, "app"), "x");
  EXPECT_TRUE(remove_label(job, "app"));
  EXPECT_FALSE(remove_label(job, "app"));

  json bare = {{"metadata", {{"name", "n"}, {"annotations", nullptr}}}};
  set_annotation(bare, "a", "1");
  EXPECT_EQ(get_annotation(bare, "a"), "1");
  EXPECT_TRUE(remove_annotation(bare, "a"));
  json empty = json::object();
  EXPECT_FALSE(remove_annotation(empty, "a"));
  EXPECT_EQ(empty, json::object());
}

TEST(ObjectTest, AnnotationMergePatchesMatchWhatTheProberSends) {
  const json remove = fixture("200-node-remove-annotation-merge-patch.json");
  EXPECT_EQ(annotation_merge_patch("net.tessel.dev/rtt.gpu-node-a", std::nullopt),
            remove.at("request").at("body"));
  EXPECT_FALSE(response_body("200-node-remove-annotation-merge-patch.json")
                   .at("metadata")
                   .at("annotations")
                   .contains("net.tessel.dev/rtt.gpu-node-a"));

  const json set = fixture("200-node-annotate-merge-patch.json").at("request").at("body");
  EXPECT_EQ(
      annotation_merge_patch("net.tessel.dev/rtt.gpu-node-a",
                             "12ms")["metadata"]["annotations"]["net.tessel.dev/rtt.gpu-node-a"],
      set["metadata"]["annotations"]["net.tessel.dev/rtt.gpu-node-a"]);
}

// --- ownerReferences ------------------------------------------------------------------------

TEST(ObjectTest, ControllerReferenceFromTheOwner) {
  const json job = response_body("200-get-trainingjob.json");
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "gpt-a-s0-r0"}, {"namespace", "default"}}}};
  EXPECT_FALSE(controller_owner(pod).has_value());
  EXPECT_TRUE(set_controller_reference(pod, job));
  EXPECT_FALSE(set_controller_reference(pod, job));  // idempotent

  const auto owner = controller_owner(pod);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(*owner, (json{{"apiVersion", "tessel.dev/v1alpha1"},
                          {"kind", "TrainingJob"},
                          {"name", "gpt-a"},
                          {"uid", "9cb914b6-62d7-49e5-81a5-6df8560286df"},
                          {"controller", true}}));
  EXPECT_EQ(pod["metadata"]["ownerReferences"].size(), 1u);

  json other = job;
  other["metadata"]["uid"] = "another-uid";
  EXPECT_THROW(set_controller_reference(pod, other), std::invalid_argument);
}

TEST(ObjectTest, ControllerReferenceRespectsNamespaces) {
  const json job = response_body("200-get-trainingjob.json");
  json elsewhere = {{"metadata", {{"name", "p"}, {"namespace", "other"}}}};
  EXPECT_THROW(set_controller_reference(elsewhere, job), std::invalid_argument);
  json node = {{"metadata", {{"name", "gpu-node-a"}}}};
  EXPECT_THROW(set_controller_reference(node, job), std::invalid_argument);
  // A cluster-scoped owner may own a namespaced object.
  json secret = {{"metadata", {{"name", "kubeconfig"}, {"namespace", "tessel-system"}}}};
  EXPECT_TRUE(set_controller_reference(secret, response_body("200-get-cluster-scoped-cr.json")));
}

// --- finalizers -----------------------------------------------------------------------------

TEST(ObjectTest, FinalizersAreIdempotent) {
  json job = response_body("201-create-with-finalizer.json");
  EXPECT_EQ(object_finalizers(job), std::vector<std::string>{"tessel.dev/cleanup"});
  EXPECT_TRUE(has_finalizer(job, "tessel.dev/cleanup"));
  EXPECT_FALSE(add_finalizer(job, "tessel.dev/cleanup"));
  EXPECT_TRUE(add_finalizer(job, "tessel.dev/other"));
  EXPECT_EQ(object_finalizers(job),
            (std::vector<std::string>{"tessel.dev/cleanup", "tessel.dev/other"}));
  EXPECT_TRUE(remove_finalizer(job, "tessel.dev/cleanup"));
  EXPECT_FALSE(remove_finalizer(job, "tessel.dev/cleanup"));
  EXPECT_TRUE(remove_finalizer(job, "tessel.dev/other"));
  EXPECT_FALSE(job["metadata"].contains("finalizers"));

  json fresh = json::object();
  EXPECT_TRUE(add_finalizer(fresh, "tessel.dev/cleanup"));
  EXPECT_TRUE(has_finalizer(fresh, "tessel.dev/cleanup"));
}

// --- conditions -----------------------------------------------------------------------------

const system_clock::time_point kNow = sys_days{2026y / November / 22} + 8h + 30min + 5s;

TEST(ObjectTest, FindConditionInAStatusPatchResponse) {
  const json job = response_body("200-status-merge-patch.json");
  const auto placed = find_condition(job, "Placed");
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(placed->status, "False");
  EXPECT_EQ(placed->reason, "Searching");
  EXPECT_EQ(placed->message, "running the hybrid genetic search");
  EXPECT_EQ(placed->last_transition_time, "2026-11-21T23:00:00Z");
  EXPECT_EQ(placed->observed_generation, 2);
  EXPECT_FALSE(is_condition_true(job, "Placed"));
  EXPECT_FALSE(find_condition(job, "Ready").has_value());
  EXPECT_FALSE(find_condition(response_body("200-get-trainingjob.json"), "Placed").has_value());
}

TEST(ObjectTest, SetConditionMovesTransitionTimeOnlyOnStatusChange) {
  json job = response_body("200-status-merge-patch.json");
  Condition placed{"Placed", "False", "Searching", "running the hybrid genetic search", "", 2};
  EXPECT_FALSE(set_condition(job, placed, kNow));  // identical: nothing to write

  placed.message = "generation 7 of the search";
  placed.observed_generation = 3;
  EXPECT_TRUE(set_condition(job, placed, kNow));
  auto stored = find_condition(job, "Placed");
  EXPECT_EQ(stored->message, "generation 7 of the search");
  EXPECT_EQ(stored->observed_generation, 3);
  EXPECT_EQ(stored->last_transition_time, "2026-11-21T23:00:00Z");  // status unchanged

  placed.status = "True";
  placed.reason = "Placed";
  EXPECT_TRUE(set_condition(job, placed, kNow));
  stored = find_condition(job, "Placed");
  EXPECT_EQ(stored->last_transition_time, "2026-11-22T08:30:05Z");
  EXPECT_TRUE(is_condition_true(job, "Placed"));
  EXPECT_EQ(job["status"]["conditions"].size(), 1u);
  EXPECT_EQ(job["status"]["phase"], "Running");  // the rest of status is untouched
}

TEST(ObjectTest, SetConditionCreatesStatusAndAppends) {
  json crd = {{"metadata", {{"name", "x"}}}, {"status", {{"conditions", nullptr}}}};
  EXPECT_TRUE(set_condition(crd, {"Ready", "Unknown", "Starting", "", "", 0}, kNow));
  EXPECT_TRUE(set_condition(crd, {"Placed", "True", "Placed", "ok", "", 1}, kNow));
  ASSERT_EQ(crd["status"]["conditions"].size(), 2u);
  EXPECT_EQ(crd["status"]["conditions"][0]["type"], "Ready");
  EXPECT_FALSE(crd["status"]["conditions"][0].contains("observedGeneration"));
  EXPECT_EQ(crd["status"]["conditions"][1]["lastTransitionTime"], "2026-11-22T08:30:05Z");

  json bare = json::object();
  EXPECT_TRUE(set_condition(bare, {"Ready", "True", "Up", "", "", 0}, kNow));
  EXPECT_THROW(set_condition(bare, {"Ready", "true", "Up", "", "", 0}), std::invalid_argument);
  EXPECT_THROW(set_condition(bare, {"", "True", "Up", "", "", 0}), std::invalid_argument);
}

TEST(ObjectTest, Rfc3339IsUtcWholeSeconds) {
  EXPECT_EQ(format_rfc3339(sys_days{2026y / November / 21} + 23h + 1min + 17s + 999ms),
            "2026-11-21T23:01:17Z");
}

// --- label selectors ------------------------------------------------------------------------

TEST(LabelSelectorTest, ParsesEveryOperator) {
  const auto selector = LabelSelector::parse("a=b,c!=d,e in (x, y),f notin (z),g,!h");
  const auto& r = selector.requirements();
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0].op, SelectorOperator::kEquals);
  EXPECT_EQ(r[1].op, SelectorOperator::kNotEquals);
  EXPECT_EQ(r[2].op, SelectorOperator::kIn);
  EXPECT_EQ(r[2].values, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(r[3].op, SelectorOperator::kNotIn);
  EXPECT_EQ(r[4].op, SelectorOperator::kExists);
  EXPECT_EQ(r[5].op, SelectorOperator::kDoesNotExist);
  EXPECT_EQ(r[5].key, "h");
  EXPECT_EQ(selector.to_string(), "a=b,c!=d,e in (x,y),f notin (z),g,!h");
  EXPECT_EQ(LabelSelector::parse(selector.to_string()).to_string(), selector.to_string());
  EXPECT_EQ(LabelSelector::parse("a==b").to_string(), "a=b");
}

TEST(LabelSelectorTest, MatchesFollowKubernetesSemantics) {
  const auto selector = LabelSelector::parse("a=b,c!=d,e in (x,y),f notin (z),g,!h");
  std::map<std::string, std::string> labels = {{"a", "b"}, {"e", "x"}, {"g", ""}};
  EXPECT_TRUE(selector.matches(labels));  // absent c and f satisfy != and notin
  labels["c"] = "d";
  EXPECT_FALSE(selector.matches(labels));
  labels["c"] = "other";
  labels["h"] = "1";
  EXPECT_FALSE(selector.matches(labels));
  labels.erase("h");
  labels["f"] = "z";
  EXPECT_FALSE(selector.matches(labels));
  labels["f"] = "w";
  labels["e"] = "q";
  EXPECT_FALSE(selector.matches(labels));

  EXPECT_TRUE(LabelSelector().matches(labels));
  EXPECT_TRUE(LabelSelector::parse("").empty());
}

TEST(LabelSelectorTest, AgreesWithTheServerOnListFixtures) {
  const struct {
    const char* filtered;
    const char* unfiltered;
  } cases[] = {{"200-list-trainingjobs-labelselector.json", "200-list-trainingjobs.json"},
               {"200-list-nodes-labelselector-gpu.json", "200-list-nodes.json"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.filtered);
    const json list = fixture(c.filtered);
    const auto selector =
        LabelSelector::parse(query_parameter(list.at("request").at("path"), "labelSelector"));
    EXPECT_FALSE(selector.empty());
    std::vector<std::string> matching;
    const json all = response_body(c.unfiltered);
    for (const json& item : all.at("items")) {
      if (selector.matches(item)) matching.push_back(object_name(item));
    }
    EXPECT_EQ(matching, names_of(list.at("response").at("body").at("items")));
  }
}

TEST(LabelSelectorTest, ErrorsNameTheBadTerm) {
  const char* bad[] = {"a=b,,c", "e in (x", "e in x", "bad key", "a=b c",        "-a=b",      "a!b",
                       "a=(x)",  "x/y/z=1", "a=b,!",  "a>x",     "e within (x)", "x in (a,,)"};
  for (const char* text : bad) {
    SCOPED_TRACE(text);
    try {
      LabelSelector::parse(text);
      ADD_FAILURE() << "parsed";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("invalid label selector \"" + std::string(text)),
                std::string::npos);
    }
  }
  try {
    LabelSelector::parse("app=web,tier in (a,b");
    ADD_FAILURE() << "parsed";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("\"tier in (a,b\""), std::string::npos);
  }
}

// --- field selectors ------------------------------------------------------------------------

TEST(FieldSelectorTest, ParsesMatchesAndRenders) {
  const auto selector = FieldSelector::parse("metadata.name=gpt-a,status.phase!=Failed");
  ASSERT_EQ(selector.requirements().size(), 2u);
  EXPECT_FALSE(selector.requirements()[1].equals);
  EXPECT_EQ(selector.to_string(), "metadata.name=gpt-a,status.phase!=Failed");
  EXPECT_EQ(FieldSelector::parse("spec.nodeName==n").to_string(), "spec.nodeName=n");

  json pod = response_body("200-pod-get-running.json");
  const std::string node = pod["spec"]["nodeName"];
  EXPECT_TRUE(FieldSelector::parse("spec.nodeName=" + node).matches(pod));
  EXPECT_TRUE(FieldSelector::parse("status.phase=Running,metadata.namespace=default").matches(pod));
  EXPECT_FALSE(FieldSelector::parse("status.phase!=Running").matches(pod));
  EXPECT_TRUE(FieldSelector::parse("spec.nodeName=").matches(json::object()));  // unbound
  EXPECT_TRUE(FieldSelector().matches(pod));
}

TEST(FieldSelectorTest, AgreesWithTheServerOnListFixtures) {
  const json list = fixture("200-list-trainingjobs-fieldselector-name.json");
  const auto selector =
      FieldSelector::parse(query_parameter(list.at("request").at("path"), "fieldSelector"));
  std::vector<std::string> matching;
  const json all = response_body("200-list-trainingjobs.json");
  for (const json& item : all.at("items")) {
    if (selector.matches(item)) matching.push_back(object_name(item));
  }
  EXPECT_EQ(matching, names_of(list.at("response").at("body").at("items")));
  EXPECT_EQ(matching, std::vector<std::string>{"gpt-b"});

  const json pods = fixture("200-list-pods-fieldselector-nodename.json");
  const auto on_node =
      FieldSelector::parse(query_parameter(pods.at("request").at("path"), "fieldSelector"));
  EXPECT_EQ(on_node.to_string(), "spec.nodeName=gpu-node-a");
  for (const json& pod : pods.at("response").at("body").at("items")) {
    EXPECT_TRUE(on_node.matches(pod));
  }
}

TEST(FieldSelectorTest, ErrorsNameTheBadTerm) {
  // Which fields exist is the server's decision: "=x" or "spec..nodeName=a" parse (and the
  // server refuses them as unsupported fields), as do empty terms ("a=b,,c=d").
  for (const char* text : {"metadata.name", "a=b,c", "a=b=c", "a=\\x", "a=b\\"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(FieldSelector::parse(text), std::invalid_argument);
  }
  try {
    FieldSelector::parse("metadata.name=a,status phase");
    ADD_FAILURE() << "parsed";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("\"status phase\""), std::string::npos);
  }
}

}  // namespace
}  // namespace tessel::kube
