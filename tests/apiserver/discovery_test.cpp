// Discovery and OpenAPI documents against the ones a v1.26 kube-apiserver served
// (fixtures/kube-1.26/discovery) and the minimal OpenAPI kubectl 1.32 was shown to need
// (fixtures/kube-1.26/openapi-minimal); the served built-in resources against the captured
// discovery documents, field by field.
#include "tests/support/discovery.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/kube/fixtures.h"
#include "tests/support/api_builtin_resources.h"
#include "tests/support/api_resources.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

json captured(const std::string& name) { return kube::testing::fixture(name)["response"]["body"]; }

json trainingjob_crd() { return captured("200-get-crd-established.json"); }

// What the test server serves with tessel's TrainingJob CRD established, as the captured server
// did.
std::vector<ApiResource> served(const json& crd = trainingjob_crd()) {
  ServedResources resources;
  resources.serve(crd);
  return resources.resources();
}

ApiResource resource(const std::string& group, const std::string& version,
                     const std::string& plural, const std::string& kind) {
  ApiResource r;
  r.group = group;
  r.version = version;
  r.resource = plural;
  r.kind = kind;
  return r;
}

// The captured entry of `name` in an APIResourceList.
json entry_named(const json& list, const std::string& name) {
  for (const auto& entry : list["resources"]) {
    if (entry["name"] == name) return entry;
  }
  return nullptr;
}

TEST(VersionDocument, MatchesTheCapturedOneButForBuildDetails) {
  json expected = captured("discovery/version.json");
  json version = version_document("v1.26.4");
  for (const char* scrubbed : {"gitCommit", "buildDate"}) {
    EXPECT_FALSE(version[scrubbed].get<std::string>().empty());
    version[scrubbed] = expected[scrubbed];
  }
  EXPECT_EQ(version, expected);
  EXPECT_EQ(version_document("v1.30.2")["minor"], "30");
  EXPECT_THROW(version_document("1.26"), std::invalid_argument);
}

TEST(CoreApiVersions, MatchesTheCapturedOne) {
  EXPECT_EQ(core_api_versions("<apiserver-host:port>"), captured("discovery/api.json"));
  EXPECT_FALSE(core_api_versions().contains("serverAddressByClientCIDRs"));
}

TEST(ApiGroupList, ListsTheServedGroupsAsTheRealServerDoes) {
  const json expected = captured("discovery/apis.json");
  const json list = api_group_list(served());
  EXPECT_EQ(list["kind"], "APIGroupList");
  EXPECT_EQ(list["apiVersion"], "v1");
  // Each served group is listed exactly as the real server lists it, in the real server's order.
  std::size_t position = 0;
  for (const auto& group : list["groups"]) {
    while (position < expected["groups"].size() &&
           expected["groups"][position]["name"] != group["name"]) {
      ++position;
    }
    ASSERT_LT(position, expected["groups"].size()) << group["name"] << " out of order or unknown";
    EXPECT_EQ(group, expected["groups"][position]);
  }
  // apps, events, authorization, policy, rbac, admissionregistration, apiextensions,
  // coordination, tessel.dev
  EXPECT_EQ(list["groups"].size(), 9u);
}

TEST(ApiGroupList, OrdersVersionsByKubernetesPriority) {
  std::vector<ApiResource> served;
  for (const char* version : {"v1alpha1", "v2", "v1beta2", "v1", "v1beta10", "zzz"}) {
    served.push_back(resource("example.com", version, "things", "Thing"));
  }
  const json group = api_group(served, "example.com");
  std::vector<std::string> versions;
  for (const auto& v : group["versions"]) versions.push_back(v["version"]);
  EXPECT_EQ(versions,
            (std::vector<std::string>{"v2", "v1", "v1beta10", "v1beta2", "v1alpha1", "zzz"}));
  EXPECT_EQ(group["preferredVersion"]["version"], "v2");
}

TEST(ApiGroup, MatchesTheCapturedOne) {
  EXPECT_EQ(api_group(served(), "tessel.dev"), captured("discovery/apis-tessel.dev.json"));
  EXPECT_TRUE(api_group(served(), "nope.example.com").is_null());
  EXPECT_TRUE(api_group(served(), "").is_null());
}

TEST(ApiResourceList, CoreResourcesAreListedAsTheRealServerListsThem) {
  const json expected = captured("discovery/api-v1.json");
  const json list = api_resource_list(served(), "", "v1");
  EXPECT_EQ(list["kind"], expected["kind"]);
  EXPECT_EQ(list["groupVersion"], "v1");
  EXPECT_FALSE(list.contains("apiVersion"));  // the core list has none
  std::vector<std::string> names;
  for (const auto& entry : list["resources"]) {
    names.push_back(entry["name"]);
    EXPECT_EQ(entry, entry_named(expected, entry["name"]));
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names, (std::vector<std::string>{"configmaps", "endpoints", "events", "namespaces",
                                             "namespaces/finalize", "namespaces/status", "nodes",
                                             "nodes/status", "pods", "pods/binding", "pods/status",
                                             "secrets", "serviceaccounts", "serviceaccounts/token",
                                             "services", "services/status"}));
}

TEST(ApiResourceList, GroupsServedWhollyMatchExactly) {
  for (const auto& [group, file] : std::vector<std::pair<std::string, std::string>>{
           {"coordination.k8s.io", "discovery/apis-coordination.k8s.io-v1.json"},
           {"events.k8s.io", "discovery/apis-events.k8s.io-v1.json"},
           {"apiextensions.k8s.io", "discovery/apis-apiextensions.k8s.io-v1.json"}}) {
    EXPECT_EQ(api_resource_list(served(), group, "v1"), captured(file)) << group;
  }
}

TEST(ApiResourceList, EveryServedBuiltinResourceIsItsCapturedEntry) {
  // Every field of every served resource and subresource, where the fixtures captured its
  // group-version; the others come from the hand-written documents and are checked for shape.
  const std::set<std::string> captured_versions = {"v1", "apps/v1", "apiextensions.k8s.io/v1",
                                                   "coordination.k8s.io/v1", "events.k8s.io/v1"};
  std::size_t compared = 0;
  for (const ApiResource& info : served_builtin_resources()) {
    SCOPED_TRACE(info.api_version() + " " + info.resource);
    EXPECT_FALSE(info.kind.empty());
    EXPECT_FALSE(info.verbs.empty());
    if (!captured_versions.contains(info.api_version())) continue;
    const std::string file = info.group.empty()
                                 ? "discovery/api-v1.json"
                                 : "discovery/apis-" + info.group + "-" + info.version + ".json";
    const json expected = captured(file);
    for (const json& entry : resource_list_entries(info)) {
      EXPECT_EQ(entry, entry_named(expected, entry["name"]));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 25u);  // entries: 16 core/v1, 5 apps, 2 apiextensions, 1 each of the events
}

TEST(ApiResourceList, ParsesWhatItListsBack) {
  for (const char* file : {"discovery/api-v1.json", "discovery/apis-apps-v1.json",
                           "discovery/apis-tessel.dev-v1alpha1.json"}) {
    SCOPED_TRACE(file);
    const json document = captured(file);
    std::vector<json> entries;
    for (const ApiResource& info : parse_resource_list(document)) {
      for (json& entry : resource_list_entries(info)) entries.push_back(std::move(entry));
    }
    std::vector<json> expected = document["resources"];
    const auto by_name = [](const json& a, const json& b) { return a["name"] < b["name"]; };
    std::sort(entries.begin(), entries.end(), by_name);
    std::sort(expected.begin(), expected.end(), by_name);
    EXPECT_EQ(entries, expected);
  }
  EXPECT_THROW(parse_resource_list(captured("discovery/api.json")), std::invalid_argument);
  EXPECT_THROW(parse_resource_list(json{{"kind", "APIResourceList"},
                                        {"groupVersion", "v1"},
                                        {"resources", {{{"name", "pods/status"}}}}}),
               std::invalid_argument);
  EXPECT_THROW(served_builtin_resource("", "pods/log"), std::out_of_range);
}

TEST(ApiResourceList, CustomResourcesTakeSingularAndCategoriesFromTheirDefinition) {
  const json expected = captured("discovery/apis-tessel.dev-v1alpha1.json");
  EXPECT_EQ(api_resource_list(served(), "tessel.dev", "v1alpha1"), expected);
  // Without them in its definition a custom resource gets the CRD defaults.
  json crd = trainingjob_crd();
  crd["spec"]["names"].erase("singular");
  crd["spec"]["names"].erase("categories");
  const json bare = api_resource_list(served(crd), "tessel.dev", "v1alpha1");
  EXPECT_EQ(entry_named(bare, "trainingjobs")["singularName"], "trainingjob");
  EXPECT_FALSE(entry_named(bare, "trainingjobs").contains("categories"));
  EXPECT_TRUE(api_resource_list(served(), "tessel.dev", "v1").is_null());
  EXPECT_TRUE(api_resource_list(served(), "nope.example.com", "v1").is_null());
}

TEST(OpenApi, CustomResourceDocumentIsTheOneKubeApiserverGenerates) {
  const json document =
      openapi_document(served(), {trainingjob_crd()}, "/openapi/v3/apis/tessel.dev/v1alpha1");
  EXPECT_EQ(document, kube::testing::fixture("discovery/openapi-v3-apis-tessel.dev-v1alpha1.json"));
}

TEST(OpenApi, IndexPointsAtEveryServedGroupVersionWithItsHash) {
  const std::vector<ApiResource> served = ::tessel::testing::served();
  const json index = openapi_document(served, {trainingjob_crd()}, "/openapi/v3");
  const json captured_index = captured("discovery/openapi-v3-index.json");
  for (const char* key : {"api/v1", "apis/tessel.dev/v1alpha1", "apis/coordination.k8s.io/v1",
                          "apis/events.k8s.io/v1", "apis/apiextensions.k8s.io/v1", "apis/apps/v1",
                          "apis/policy/v1", "apis/rbac.authorization.k8s.io/v1",
                          "apis/admissionregistration.k8s.io/v1", "apis/authorization.k8s.io/v1"}) {
    ASSERT_TRUE(index["paths"].contains(key)) << key;
    ASSERT_TRUE(captured_index["paths"].contains(key)) << key;
    const std::string url = index["paths"][key]["serverRelativeURL"];
    EXPECT_TRUE(url.starts_with("/openapi/v3/" + std::string(key) + "?hash=")) << url;
    EXPECT_EQ(url.size() - url.find('=') - 1, 128u);  // SHA-512, hex, as the real server's
  }
  EXPECT_EQ(index["paths"].size(), 10u);
  // The hash follows the document.
  const json other = openapi_document(served, {}, "/openapi/v3");
  EXPECT_NE(other["paths"]["apis/tessel.dev/v1alpha1"], index["paths"]["apis/tessel.dev/v1alpha1"]);
  EXPECT_EQ(other["paths"]["api/v1"], index["paths"]["api/v1"]);
}

// What kubectl 1.32 looks for before an apply: the PATCH operation of the kind, tagged with
// its group-version-kind, offering the fieldValidation parameter.
void expect_patch_operation(const json& document, const json& minimal, const std::string& path) {
  const json& expected = minimal["paths"][path]["patch"];
  ASSERT_TRUE(document["paths"].contains(path)) << path;
  const json& patch = document["paths"][path]["patch"];
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"], expected["x-kubernetes-group-version-kind"]);
  EXPECT_EQ(patch["x-kubernetes-action"], "patch");
  bool field_validation = false;
  for (const auto& p : patch["parameters"]) {
    field_validation |= p["name"] == "fieldValidation" && p["in"] == "query";
  }
  EXPECT_TRUE(field_validation) << path;
}

TEST(OpenApi, BuiltinGroupVersionsOfferWhatKubectlApplyNeeds) {
  const json minimal = kube::testing::fixture("openapi-minimal/openapi-v3-api-v1.json");
  const json document = openapi_document(served(), {}, "/openapi/v3/api/v1");
  for (const auto& [path, unused] : minimal["paths"].items()) {
    expect_patch_operation(document, minimal, path);
  }
  EXPECT_TRUE(document["paths"].contains("/api/v1/namespaces/{namespace}/pods/{name}"));
}

TEST(OpenApi, CustomResourceDocumentOffersWhatKubectlApplyNeeds) {
  const json minimal =
      kube::testing::fixture("openapi-minimal/openapi-v3-apis-tessel.dev-v1alpha1.json");
  const json document =
      openapi_document(served(), {trainingjob_crd()}, "/openapi/v3/apis/tessel.dev/v1alpha1");
  for (const auto& [path, unused] : minimal["paths"].items()) {
    expect_patch_operation(document, minimal, path);
  }
}

TEST(OpenApi, ClusterScopedCustomResourcesHaveNoNamespaceInTheirPaths) {
  json crd = trainingjob_crd();
  crd["spec"]["scope"] = "Cluster";
  const json document =
      openapi_document(served(crd), {crd}, "/openapi/v3/apis/tessel.dev/v1alpha1");
  const json& paths = document["paths"];
  ASSERT_TRUE(paths.contains("/apis/tessel.dev/v1alpha1/trainingjobs/{name}/status"));
  EXPECT_EQ(paths["/apis/tessel.dev/v1alpha1/trainingjobs/{name}"]["get"]["operationId"],
            "readTesselDevV1alpha1TrainingJob");
  EXPECT_EQ(paths["/apis/tessel.dev/v1alpha1/trainingjobs"]["delete"]["operationId"],
            "deleteTesselDevV1alpha1CollectionTrainingJob");
  EXPECT_EQ(paths.size(), 3u);
}

TEST(OpenApi, UnknownDocumentsAreAbsent) {
  const std::vector<ApiResource> served = served_builtin_resources();
  EXPECT_TRUE(openapi_document(served, {}, "/openapi/v2").is_null());
  EXPECT_TRUE(openapi_document(served, {}, "/openapi/v3/apis/batch/v1").is_null());
  EXPECT_TRUE(openapi_document(served, {}, "/openapi/v3/apis/tessel.dev/v1alpha1").is_null());
  EXPECT_TRUE(openapi_document(served, {}, "/openapi/v3/apis/tessel.dev").is_null());
}

}  // namespace
}  // namespace tessel::testing
