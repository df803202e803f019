// Discovery and OpenAPI documents against the ones a v1.26 kube-apiserver served
// (fixtures/kube-1.26/discovery) and the minimal OpenAPI kubectl 1.32 was shown to need
// (fixtures/kube-1.26/openapi-minimal).
#include "tests/support/discovery.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/kube/custom_resources.h"
#include "tests/kube/fixtures.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
using tessel::kube::ResourceRegistry;

json captured(const std::string& name) { return kube::testing::fixture(name)["response"]["body"]; }

json trainingjob_crd() { return captured("200-get-crd-established.json"); }

// What the captured server served: the built-in resources and tessel's two CRDs' (kube/ builds
// in no custom resource).
ResourceRegistry served() {
  ResourceRegistry registry;
  registry.add(kube::testing::trainingjobs_resource());
  registry.add(kube::testing::memberclusters_resource());
  return registry;
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
  EXPECT_EQ(list["groups"].size(), 4u);  // events, apiextensions, coordination, tessel.dev
}

TEST(ApiGroupList, OrdersVersionsByKubernetesPriority) {
  ResourceRegistry served;
  for (const char* version : {"v1alpha1", "v2", "v1beta2", "v1", "v1beta10", "zzz"}) {
    served.add({{"example.com", version, "things"}, "Thing", true, {}, {}});
  }
  const json group = api_group(served, "example.com");
  std::vector<std::string> versions;
  for (const auto& v : group["versions"]) versions.push_back(v["version"]);
  EXPECT_EQ(versions,
            (std::vector<std::string>{"v2", "v1", "v1beta10", "v1beta2", "v1alpha1", "zzz"}));
  EXPECT_EQ(group["preferredVersion"]["version"], "v2");
}

TEST(ApiGroup, MatchesTheCapturedOne) {
  EXPECT_EQ(api_group(served(), "tessel.dev"),
            captured("discovery/apis-tessel.dev.json"));
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
  EXPECT_EQ(names.size(), 14u);
}

TEST(ApiResourceList, GroupsServedWhollyMatchExactly) {
  for (const auto& [group, file] : std::vector<std::pair<std::string, std::string>>{
           {"coordination.k8s.io", "discovery/apis-coordination.k8s.io-v1.json"},
           {"events.k8s.io", "discovery/apis-events.k8s.io-v1.json"},
           {"apiextensions.k8s.io", "discovery/apis-apiextensions.k8s.io-v1.json"}}) {
    EXPECT_EQ(api_resource_list(served(), group, "v1"), captured(file)) << group;
  }
}

TEST(ApiResourceList, CustomResourcesTakeSingularAndCategoriesFromTheirDefinition) {
  const json expected = captured("discovery/apis-tessel.dev-v1alpha1.json");
  const json list =
      api_resource_list(served(), {trainingjob_crd()}, "tessel.dev", "v1alpha1");
  EXPECT_EQ(entry_named(list, "trainingjobs"), entry_named(expected, "trainingjobs"));
  EXPECT_EQ(entry_named(list, "trainingjobs/status"), entry_named(expected, "trainingjobs/status"));
  // Without its definition a custom resource still gets the CRD defaults.
  const json bare = api_resource_list(served(), "tessel.dev", "v1alpha1");
  EXPECT_EQ(entry_named(bare, "memberclusters")["singularName"], "membercluster");
  EXPECT_FALSE(entry_named(bare, "memberclusters").contains("categories"));
  EXPECT_TRUE(api_resource_list(served(), "tessel.dev", "v1").is_null());
  EXPECT_TRUE(api_resource_list(served(), "nope.example.com", "v1").is_null());
}

TEST(ApiResourceList, RejectsSubresourcesItCannotDescribe) {
  ResourceRegistry served;
  served.add({{"", "v1", "pods"}, "Pod", true, {"po"}, {"status", "exec"}});
  EXPECT_THROW(api_resource_list(served, "", "v1"), std::invalid_argument);
}

TEST(OpenApi, CustomResourceDocumentIsTheOneKubeApiserverGenerates) {
  const json document = openapi_document(served(), {trainingjob_crd()},
                                         "/openapi/v3/apis/tessel.dev/v1alpha1");
  EXPECT_EQ(document, kube::testing::fixture("discovery/openapi-v3-apis-tessel.dev-v1alpha1.json"));
}

TEST(OpenApi, IndexPointsAtEveryServedGroupVersionWithItsHash) {
  const ResourceRegistry served = ::tessel::testing::served();
  const json index = openapi_document(served, {trainingjob_crd()}, "/openapi/v3");
  const json captured_index = captured("discovery/openapi-v3-index.json");
  for (const char* key : {"api/v1", "apis/tessel.dev/v1alpha1", "apis/coordination.k8s.io/v1",
                          "apis/events.k8s.io/v1", "apis/apiextensions.k8s.io/v1"}) {
    ASSERT_TRUE(index["paths"].contains(key)) << key;
    ASSERT_TRUE(captured_index["paths"].contains(key)) << key;
    const std::string url = index["paths"][key]["serverRelativeURL"];
    EXPECT_TRUE(url.starts_with("/openapi/v3/" + std::string(key) + "?hash=")) << url;
    EXPECT_EQ(url.size() - url.find('=') - 1, 128u);  // SHA-512, hex, as the real server's
  }
  EXPECT_EQ(index["paths"].size(), 5u);
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
  const json document = openapi_document(served(), {trainingjob_crd()},
                                         "/openapi/v3/apis/tessel.dev/v1alpha1");
  for (const auto& [path, unused] : minimal["paths"].items()) {
    expect_patch_operation(document, minimal, path);
  }
}

TEST(OpenApi, ClusterScopedCustomResourcesHaveNoNamespaceInTheirPaths) {
  json crd = trainingjob_crd();
  crd["spec"]["scope"] = "Cluster";
  ResourceRegistry served;
  served.add(
      {{"tessel.dev", "v1alpha1", "trainingjobs"}, "TrainingJob", false, {"tj"}, {"status"}});
  const json document = openapi_document(served, {crd}, "/openapi/v3/apis/tessel.dev/v1alpha1");
  const json& paths = document["paths"];
  ASSERT_TRUE(paths.contains("/apis/tessel.dev/v1alpha1/trainingjobs/{name}/status"));
  EXPECT_EQ(paths["/apis/tessel.dev/v1alpha1/trainingjobs/{name}"]["get"]["operationId"],
            "readTesselDevV1alpha1TrainingJob");
  EXPECT_EQ(paths["/apis/tessel.dev/v1alpha1/trainingjobs"]["delete"]["operationId"],
            "deleteTesselDevV1alpha1CollectionTrainingJob");
  EXPECT_EQ(paths.size(), 3u);
}

TEST(OpenApi, UnknownDocumentsAreAbsent) {
  const ResourceRegistry served;
  EXPECT_TRUE(openapi_document(served, {}, "/openapi/v2").is_null());
  EXPECT_TRUE(openapi_document(served, {}, "/openapi/v3/apis/apps/v1").is_null());
  EXPECT_TRUE(openapi_document(served, {}, "/openapi/v3/apis/tessel.dev").is_null());
}

}  // namespace
}  // namespace tessel::testing
