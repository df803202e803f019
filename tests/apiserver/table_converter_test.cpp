// Tables against the captured kube-apiserver 1.26 responses (200-table-*.json,
// watch-stream-table.jsonl) and against the printers' rules for the other built-in kinds.
#include "tests/support/table_converter.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/kube/fixtures.h"
#include "tests/support/json_path.h"
#include "tests/support/table_converter_time.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using std::chrono::system_clock;

std::vector<json> load_watch_events(const std::string& name) {
  std::ifstream in(kube::testing::kFixtures / name);
  if (!in) throw std::runtime_error("cannot open fixture " + name);
  std::vector<json> events;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) events.push_back(json::parse(line));
  }
  return events;
}

system_clock::time_point at(const std::string& rfc3339) {
  const auto time = parse_rfc3339(rfc3339);
  if (!time) throw std::runtime_error("bad time " + rfc3339);
  return *time;
}

TableConverter::WallClock clock_at(const std::string& rfc3339) {
  const auto now = at(rfc3339);
  return [now] { return now; };
}

json training_job_version() {
  return kube::testing::fixture(
      "200-get-crd-established.json")["response"]["body"]["spec"]["versions"][0];
}

TableConverter training_job_tables(const std::string& now) {
  TableConverter converter = TableConverter::for_crd_version(training_job_version());
  converter.set_clock(clock_at(now));
  return converter;
}

// The list the table fixtures were taken with (same server state, same second).
json training_job_list() {
  return kube::testing::fixture("200-list-trainingjobs.json")["response"]["body"];
}

std::vector<json> items(const json& list) { return {list["items"].begin(), list["items"].end()}; }

// ---- the captured tables -----------------------------------------------------------------------

TEST(TableConverterFixtureTest, TrainingJobListWithPrinterColumns) {
  const json list = training_job_list();
  EXPECT_EQ(
      training_job_tables("2026-11-21T23:01:30Z").table(items(list), "Metadata", list["metadata"]),
      kube::testing::fixture("200-table-trainingjobs.json")["response"]["body"]);
}

TEST(TableConverterFixtureTest, TrainingJobListWithoutObjects) {
  const json list = training_job_list();
  EXPECT_EQ(
      training_job_tables("2026-11-21T23:01:30Z").table(items(list), "None", list["metadata"]),
      kube::testing::fixture("200-table-trainingjobs-includeObject-None.json")["response"]["body"]);
}

TEST(TableConverterFixtureTest, OneTrainingJob) {
  const json gpt_a = training_job_list()["items"][0];
  EXPECT_EQ(training_job_tables("2026-11-21T23:01:30Z").table_of_one(gpt_a, "Metadata"),
            kube::testing::fixture("200-table-trainingjob-single.json")["response"]["body"]);
}

TEST(TableConverterFixtureTest, WatchEventsCarryOneRowTablesWithColumnsOnlyFirst) {
  const auto events = load_watch_events("watch-stream-table.jsonl");
  ASSERT_EQ(events.size(), 2u);
  const json list = training_job_list();
  // gpt-b after its status write and gpt-c after its spec write, as the rows' metadata shows.
  json gpt_b = list["items"][1];
  gpt_b["metadata"] = events[0]["object"]["rows"][0]["object"]["metadata"];
  gpt_b["status"] = {{"phase", "Running"}, {"progress", {{"step", 7}}}};
  json gpt_c = list["items"][2];
  gpt_c["metadata"] = events[1]["object"]["rows"][0]["object"]["metadata"];
  gpt_c["spec"]["replicas"] = 16;
  const TableConverter tables = training_job_tables("2026-11-21T23:05:11Z");
  EXPECT_EQ(tables.table_of_one(gpt_b, "Metadata"), events[0]["object"]);
  EXPECT_EQ(tables.table_of_one(gpt_c, "Metadata", false), events[1]["object"]);
}

TEST(TableConverterFixtureTest, NodesWithWideColumns) {
  const json fixture = kube::testing::fixture("200-table-nodes.json");
  const json list = kube::testing::fixture("200-list-nodes.json")["response"]["body"];
  std::vector<json> nodes;
  for (const auto& node : list["items"]) {
    if (node["metadata"]["resourceVersion"] == "329") nodes.push_back(node);
  }
  TableConverter converter = TableConverter::for_builtin("", "nodes");
  converter.set_clock(clock_at("2026-11-21T23:01:30Z"));
  EXPECT_EQ(converter.table(nodes, "Metadata", {{"resourceVersion", "351"}}),
            fixture["response"]["body"]);
}

// ---- CRD columns --------------------------------------------------------------------------------

json crd_version(const json& columns) {
  return {{"name", "v1"}, {"additionalPrinterColumns", columns}};
}

json crd_version_with(const json& column) { return crd_version(json::array({column})); }

json cells_of(const json& version, const json& object,
              const std::string& now = "2026-11-21T23:01:30Z") {
  TableConverter converter = TableConverter::for_crd_version(version);
  converter.set_clock(clock_at(now));
  return converter.table({object}, "None", json::object())["rows"][0]["cells"];
}

TEST(TableConverterCrdTest, WithoutPrinterColumnsTheServerAddsAge) {
  const json crd = kube::testing::fixture("201-create-crd.json")["request"]["body"];
  TableConverter converter = TableConverter::for_crd_version(crd["spec"]["versions"][0]);
  converter.set_clock(clock_at("2026-11-21T23:10:00Z"));
  const json object = {
      {"metadata", {{"name", "edge-eu"}, {"creationTimestamp", "2026-11-21T22:57:01Z"}}}};
  const json table = converter.table({object}, "Metadata", json::object());
  const json& age = table["columnDefinitions"][1];
  EXPECT_EQ(age["name"], "Age");
  EXPECT_EQ(age["type"], "date");
  EXPECT_EQ(age["format"], "");
  EXPECT_EQ(age["description"],
            kube::testing::fixture(
                "200-table-nodes.json")["response"]["body"]["columnDefinitions"][3]
                                       ["description"]);  // ObjectMeta's creationTimestamp doc
  EXPECT_EQ(table["rows"][0]["cells"], (json{"edge-eu", "12m"}));
  EXPECT_EQ(table["metadata"], json::object());
}

TEST(TableConverterCrdTest, CellsFollowTheColumnTypes) {
  const json version = crd_version({
      {{"name", "Ready"},
       {"type", "string"},
       {"jsonPath", R"(.status.conditions[?(@.type=="Ready")].status)"}},
      {{"name", "First"}, {"type", "string"}, {"jsonPath", ".spec.clusters[0]"}},
      {{"name", "Last"}, {"type", "string"}, {"jsonPath", ".spec.clusters[-1]"}},
      {{"name", "All"}, {"type", "string"}, {"jsonPath", ".spec.clusters"}},
      {{"name", "Each"}, {"type", "string"}, {"jsonPath", ".spec.clusters[*]"}},
      {{"name", "Rate"}, {"type", "string"}, {"jsonPath", ".spec.learningRate"}},
      {{"name", "Ratio"}, {"type", "number"}, {"jsonPath", ".spec.replicas"}},
      {{"name", "Loss"}, {"type", "integer"}, {"jsonPath", ".status.loss"}},
      {{"name", "Paused"}, {"type", "boolean"}, {"jsonPath", ".spec.paused"}},
      {{"name", "WrongType"}, {"type", "boolean"}, {"jsonPath", ".spec.replicas"}},
      {{"name", "Missing"}, {"type", "string"}, {"jsonPath", ".status.nothing.here"}},
      {{"name", "Started"}, {"type", "date"}, {"jsonPath", ".status.startTime"}},
      {{"name", "Bad"}, {"type", "date"}, {"jsonPath", ".status.badTime"}},
      {{"name", "Labels"}, {"type", "string"}, {"jsonPath", ".metadata.labels"}},
  });
  const json object = {
      {"metadata", {{"name", "gpt-a"}, {"labels", {{"tessel.dev/team", "llm"}, {"tier", "a"}}}}},
      {"spec",
       {{"clusters", {"hub", "edge-eu"}},
        {"learningRate", 0.00001},
        {"replicas", 4},
        {"paused", false}}},
      {"status",
       {{"conditions",
         {{{"type", "Placed"}, {"status", "False"}}, {{"type", "Ready"}, {"status", "True"}}}},
        {"loss", 2.75},
        {"startTime", "2026-11-21T23:00:00Z"},
        {"badTime", "yesterday"}}}};
  EXPECT_EQ(cells_of(version, object),
            (json{"gpt-a", "True", "hub", "edge-eu", "[hub edge-eu]", "hub", "1e-05", 4, 2, false,
                  nullptr, nullptr, "90s", "<invalid>", "map[tessel.dev/team:llm tier:a]"}));
}

TEST(TableConverterCrdTest, QuotedNamesSelectKeysWithDots) {
  const json version = crd_version_with(
      {{"name", "Team"}, {"type", "string"}, {"jsonPath", ".metadata.labels['tessel.dev/team']"}});
  EXPECT_EQ(
      cells_of(version, {{"metadata", {{"name", "x"}, {"labels", {{"tessel.dev/team", "llm"}}}}}}),
      (json{"x", "llm"}));
}

TEST(TableConverterCrdTest, ColumnDefinitionsCarryFormatPriorityAndDescription) {
  const json version = crd_version_with({{"name", "Loss"},
                                         {"type", "number"},
                                         {"format", "float"},
                                         {"priority", 1},
                                         {"description", "Training loss"},
                                         {"jsonPath", ".status.loss"}});
  const json table = TableConverter::for_crd_version(version).table({}, "Metadata", json::object());
  EXPECT_EQ(table["columnDefinitions"][1], (json{{"name", "Loss"},
                                                 {"type", "number"},
                                                 {"format", "float"},
                                                 {"description", "Training loss"},
                                                 {"priority", 1}}));
  EXPECT_EQ(table["rows"], json::array());
}

void expect_column_rejected(const json& column, const std::string& message) {
  try {
    TableConverter::for_crd_version(crd_version_with(column));
    ADD_FAILURE() << "accepted " << column.dump();
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(error.what(), message);
  }
}

TEST(TableConverterCrdTest, BadColumnsAreRejectedNamingTheColumn) {
  expect_column_rejected({{"name", "X"}, {"type", "float"}, {"jsonPath", ".a"}},
                         "additionalPrinterColumns[0].type: Unsupported value: \"float\": "
                         "supported values: \"boolean\", \"date\", \"integer\", \"number\", "
                         "\"string\"");
  expect_column_rejected({{"name", "X"}, {"type", "string"}, {"jsonPath", "a"}},
                         "additionalPrinterColumns[0].jsonPath: Invalid value: \"a\": must be a "
                         "simple json path starting with .");
  expect_column_rejected({{"name", "X"}, {"type", "string"}, {"jsonPath", ".a[?(@.b=="}},
                         "additionalPrinterColumns[0].jsonPath: invalid JSONPath \".a[?(@.b==\": "
                         "unterminated '[' at offset 2");
  expect_column_rejected({{"type", "string"}, {"jsonPath", ".a"}},
                         "additionalPrinterColumns[0].name: Required value");
  expect_column_rejected({{"name", "X"}, {"type", "string"}, {"priority", -1}, {"jsonPath", ".a"}},
                         "additionalPrinterColumns[0].priority: Invalid value: -1: must be a "
                         "non-negative integer");
}

TEST(TableConverterTest, IncludeObjectSelectsWhatRowsCarry) {
  const json gpt_a = training_job_list()["items"][0];
  const TableConverter tables = training_job_tables("2026-11-21T23:01:30Z");
  EXPECT_EQ(tables.table({gpt_a}, "Object", json::object())["rows"][0]["object"], gpt_a);
  EXPECT_EQ(tables.table({gpt_a}, "", json::object())["rows"][0]["object"]["kind"],
            "PartialObjectMetadata");
  try {
    tables.table({gpt_a}, "Everything", json::object());
    ADD_FAILURE() << "accepted includeObject=Everything";
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(), "unrecognized includeObject value: \"Everything\"");
  }
}

TEST(TableConverterTest, ListMetadataIsCarriedOver) {
  const json table = training_job_tables("2026-11-21T23:01:30Z")
                         .table({}, "None",
                                {{"resourceVersion", "351"},
                                 {"continue", "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
                                 {"remainingItemCount", 2}});
  EXPECT_EQ(table["metadata"], (json{{"resourceVersion", "351"},
                                     {"continue", "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
                                     {"remainingItemCount", 2}}));
}

// ---- built-in printers --------------------------------------------------------------------------

json builtin_cells(const std::string& group, const std::string& resource, const json& object,
                   const std::string& now) {
  TableConverter converter = TableConverter::for_builtin(group, resource);
  converter.set_clock(clock_at(now));
  return converter.table({object}, "None", json::object())["rows"][0]["cells"];
}

std::vector<std::string> column_names(const std::string& group, const std::string& resource) {
  const json table = TableConverter::for_builtin(group, resource).table({}, "None", {});
  std::vector<std::string> names;
  for (const auto& column : table["columnDefinitions"]) names.push_back(column["name"]);
  return names;
}

using Names = std::vector<std::string>;

TEST(TableConverterBuiltinTest, PodsShowReadinessStatusRestartsAndPlacement) {
  EXPECT_EQ(column_names("", "pods"), (Names{"Name", "Ready", "Status", "Restarts", "Age", "IP",
                                             "Node", "Nominated Node", "Readiness Gates"}));
  const json running = kube::testing::fixture("200-pod-get-running.json")["response"]["body"];
  EXPECT_EQ(builtin_cells("", "pods", running, "2026-11-21T23:04:00Z"),
            (json{"gpt-a-s0-r0", "1/1", "Running", "0", "95s", "10.244.1.5", "gpu-node-a", "<none>",
                  "<none>"}));
  const json terminating =
      kube::testing::fixture("200-get-pod-terminating.json")["response"]["body"];
  EXPECT_EQ(builtin_cells("", "pods", terminating, "2026-11-21T23:02:30Z")[2], "Terminating");

  const json pending =
      kube::testing::fixture("201-create-pod-with-nodename.json")["response"]["body"];
  EXPECT_EQ(builtin_cells("", "pods", pending, "2026-11-21T23:02:30Z").at(1), "0/1");
  EXPECT_EQ(builtin_cells("", "pods", pending, "2026-11-21T23:02:30Z").at(2), "Pending");
  EXPECT_EQ(builtin_cells("", "pods", pending, "2026-11-21T23:02:30Z").at(5), "<none>");
}

TEST(TableConverterBuiltinTest, PodRestartsAndContainerReasons) {
  json pod = {{"metadata", {{"name", "p"}, {"creationTimestamp", "2026-11-21T23:00:00Z"}}},
              {"spec",
               {{"containers", {{{"name", "a"}}, {{"name", "b"}}}},
                {"readinessGates", {{{"conditionType", "tessel.dev/Peered"}}}}}},
              {"status",
               {{"phase", "Running"},
                {"conditions", {{{"type", "tessel.dev/Peered"}, {"status", "True"}}}},
                {"containerStatuses",
                 {{{"name", "a"},
                   {"ready", true},
                   {"restartCount", 2},
                   {"state", {{"running", {{"startedAt", "2026-11-21T23:05:00Z"}}}}},
                   {"lastState",
                    {{"terminated", {{"exitCode", 1}, {"finishedAt", "2026-11-21T23:04:00Z"}}}}}},
                  {{"name", "b"},
                   {"ready", false},
                   {"restartCount", 1},
                   {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}}}}}}}};
  EXPECT_EQ(builtin_cells("", "pods", pod, "2026-11-21T23:10:00Z"),
            (json{"p", "1/2", "CrashLoopBackOff", "3 (6m ago)", "10m", "<none>", "<none>", "<none>",
                  "1/1"}));
  pod["status"] = {
      {"phase", "Succeeded"},
      {"containerStatuses",
       {{{"name", "a"}, {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}}}}};
  TableConverter converter = TableConverter::for_builtin("", "pods");
  const json row = converter.table({pod}, "None", {})["rows"][0];
  EXPECT_EQ(row["cells"][2], "Completed");
  EXPECT_EQ(row["conditions"], (json{{{"type", "Completed"},
                                      {"status", "True"},
                                      {"reason", "Succeeded"},
                                      {"message", "The pod has completed successfully."}}}));
  pod["status"] = {
      {"phase", "Pending"},
      {"initContainerStatuses", {{{"name", "init"}, {"state", {{"running", json::object()}}}}}}};
  pod["spec"]["initContainers"] = {{{"name", "init"}}};
  EXPECT_EQ(builtin_cells("", "pods", pod, "2026-11-21T23:10:00Z")[2], "Init:0/1");
}

TEST(TableConverterBuiltinTest, NamespacesEventsLeasesAndServiceAccounts) {
  EXPECT_EQ(builtin_cells("", "namespaces",
                          kube::testing::fixture("201-create-namespace.json")["response"]["body"],
                          "2026-11-21T23:02:08Z"),
            (json{"tessel-system", "Active", "0s"}));
  EXPECT_EQ(column_names("", "events"),
            (Names{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message",
                   "First Seen", "Count", "Name"}));
  EXPECT_EQ(
      builtin_cells("", "events",
                    kube::testing::fixture("201-create-event-core-v1.json")["response"]["body"],
                    "2026-11-21T23:03:00Z"),
      (json{"70s", "Normal", "Placed", "trainingjob/gpt-a", "",
            "tessel-operator, tessel-operator-7d9f8-abcde",  // reportingInstance as host
            "placed 32 tasklets on 4 clusters (cost 12.3s/iter)", "70s", 1,
            "gpt-a.17a9c2f0d1e2f3a4"}));
  EXPECT_EQ(builtin_cells("coordination.k8s.io", "leases",
                          kube::testing::fixture("201-lease-create.json")["response"]["body"],
                          "2026-11-21T23:02:38Z"),
            (json{"tessel-operator-leader", "tessel-operator-7d9f8-abcde_3f1c2b7e", "30s"}));
  EXPECT_EQ(builtin_cells("", "serviceaccounts",
                          {{"metadata",
                            {{"name", "default"}, {"creationTimestamp", "2026-11-21T22:00:00Z"}}}},
                          "2026-11-21T23:00:00Z"),
            (json{"default", 0, "60m"}));
}

TEST(TableConverterBuiltinTest, ConfigMapsSecretsAndServices) {
  EXPECT_EQ(builtin_cells(
                "", "configmaps",
                {{"metadata", {{"name", "peers"}, {"creationTimestamp", "2026-11-21T23:00:00Z"}}},
                 {"data", {{"a", "1"}, {"b", "2"}}},
                 {"binaryData", {{"c", "AA=="}}}},
                "2026-11-22T01:30:00Z"),
            (json{"peers", 3, "150m"}));
  EXPECT_EQ(builtin_cells(
                "", "secrets",
                {{"metadata", {{"name", "token"}, {"creationTimestamp", "2026-11-21T23:00:00Z"}}},
                 {"type", "Opaque"},
                 {"data", {{"token", "c2VjcmV0"}}}},
                "2026-11-25T03:00:00Z"),
            (json{"token", "Opaque", 1, "3d4h"}));
  EXPECT_EQ(column_names("", "services"),
            (Names{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"}));
  EXPECT_EQ(builtin_cells(
                "", "services",
                {{"metadata", {{"name", "tessel"}, {"creationTimestamp", "2026-11-21T23:00:00Z"}}},
                 {"spec",
                  {{"type", "NodePort"},
                   {"clusterIPs", {"10.96.0.10"}},
                   {"ports",
                    {{{"port", 8443}, {"nodePort", 30443}, {"protocol", "TCP"}},
                     {{"port", 9090}, {"protocol", "TCP"}}}},
                   {"selector", {{"app", "tessel"}, {"tier", "control"}}}}}},
                "2026-11-21T23:00:05Z"),
            (json{"tessel", "NodePort", "10.96.0.10", "<none>", "8443:30443/TCP,9090/TCP", "5s",
                  "app=tessel,tier=control"}));
}

TEST(TableConverterBuiltinTest, EverythingElseGetsNameAndCreatedAt) {
  const json crd = kube::testing::fixture("200-get-crd-established.json")["response"]["body"];
  TableConverter converter =
      TableConverter::for_builtin("apiextensions.k8s.io", "customresourcedefinitions");
  const json table = converter.table({crd}, "None", {{"resourceVersion", "400"}});
  EXPECT_EQ(table["columnDefinitions"][1]["name"], "Created At");
  EXPECT_EQ(table["columnDefinitions"][1]["type"], "date");
  EXPECT_EQ(table["rows"][0]["cells"], (json{"trainingjobs.tessel.dev", "2026-11-21T22:57:10Z"}));
  EXPECT_TRUE(converter.table({}, "None", {})["rows"].is_null());
  EXPECT_EQ(TableConverter::for_builtin("", "pods").table({}, "None", {})["rows"], json::array());
}

// ---- JSONPath and times ------------------------------------------------------------------------

std::vector<json> select(const std::string& path, const json& document) {
  return JsonPath::parse(path).evaluate(document);
}

TEST(JsonPathTest, SelectsLikeClientGo) {
  const json doc = {{"items",
                     {{{"name", "a"}, {"port", 80}, {"tags", {"x"}}},
                      {{"name", "b"}, {"port", 443}},
                      {{"name", "c"}, {"port", 8080}}}},
                    {"meta", {{"a.b", 1}, {"c", {{"name", "deep"}}}}}};
  using V = std::vector<json>;
  EXPECT_EQ(select(".items[1].name", doc), (V{"b"}));
  EXPECT_EQ(select("$.items[-1].port", doc), (V{8080}));
  EXPECT_EQ(select(".items[0:2].name", doc), (V{"a", "b"}));
  EXPECT_EQ(select(".items[0,2].name", doc), (V{"a", "c"}));
  EXPECT_EQ(select(".items[*].port", doc), (V{80, 443, 8080}));
  EXPECT_EQ(select(".items[?(@.port>100)].name", doc), (V{"b", "c"}));
  EXPECT_EQ(select(".items[?(@.name!='a')].port", doc), (V{443, 8080}));
  EXPECT_EQ(select(".items[?(@.tags)].name", doc), (V{"a"}));
  EXPECT_EQ(select(".meta['a.b']", doc), (V{1}));
  EXPECT_EQ(select(".meta.a\\.b", doc), (V{1}));
  EXPECT_EQ(select("..name", doc), (V{"a", "b", "c", "deep"}));
  EXPECT_EQ(select("{.meta.*.name}", doc), (V{"deep"}));
  EXPECT_TRUE(select(".items[7].name", doc).empty());
  EXPECT_TRUE(select(".meta.c.name.more", doc).empty());
  EXPECT_EQ(select(".", doc), (V{doc}));
  EXPECT_THROW(JsonPath::parse(".items[x]"), std::invalid_argument);
  EXPECT_THROW(JsonPath::parse(""), std::invalid_argument);
}

TEST(TableTimeTest, AgesAreHumanDurations) {
  EXPECT_EQ(human_duration(seconds(-5)), "<invalid>");
  EXPECT_EQ(human_duration(seconds(-1)), "0s");
  EXPECT_EQ(human_duration(seconds(119)), "119s");
  EXPECT_EQ(human_duration(seconds(234)), "3m54s");
  EXPECT_EQ(human_duration(seconds(300)), "5m");
  EXPECT_EQ(human_duration(seconds(179 * 60)), "179m");
  EXPECT_EQ(human_duration(seconds(5 * 3600 + 180)), "5h3m");
  EXPECT_EQ(human_duration(seconds(20 * 3600)), "20h");
  EXPECT_EQ(human_duration(seconds((3 * 24 + 4) * 3600)), "3d4h");
  EXPECT_EQ(human_duration(seconds(30 * 24 * 3600)), "30d");
  EXPECT_EQ(human_duration(seconds((2 * 365 + 45) * 24 * 3600)), "2y45d");
  EXPECT_EQ(human_duration(seconds(9 * 365 * 24 * 3600)), "9y");
  EXPECT_EQ(at("2026-11-21T23:01:17.5+01:00") - at("2026-11-21T22:01:17Z"),
            std::chrono::milliseconds(500));
  EXPECT_FALSE(parse_rfc3339("2026-13-01T00:00:00Z"));
}

}  // namespace
}  // namespace tessel::testing
