#include "kube/resource.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "tests/kube/custom_resources.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using testing::fixture;
using testing::kFixtures;

std::vector<ResourceInfo> discovered(const std::string& name) {
  return parse_api_resource_list(fixture("discovery/" + name).at("response").at("body"));
}

const ResourceInfo* find(const std::vector<ResourceInfo>& list, const std::string& resource) {
  for (const ResourceInfo& info : list) {
    if (info.gvr.resource == resource) return &info;
  }
  return nullptr;
}

const ResourceInfo& builtin(std::string_view group, std::string_view resource) {
  static const ResourceRegistry registry;
  const ResourceInfo* info = registry.find_resource(group, resource);
  if (info == nullptr) throw std::logic_error("no builtin " + std::string(resource));
  return *info;
}

// --- paths ----------------------------------------------------------------------------------

TEST(ResourcePathTest, NamespacedClusterScopedAndSubresources) {
  const ResourceInfo& pods = builtin("", "pods");
  EXPECT_EQ(path(pods, "default"), "/api/v1/namespaces/default/pods");
  EXPECT_EQ(path(pods, ""), "/api/v1/pods");  // all namespaces
  EXPECT_EQ(path(pods, "default", "p", "status"), "/api/v1/namespaces/default/pods/p/status");
  EXPECT_EQ(path(builtin("", "nodes"), "", "gpu-node-b", "status"),
            "/api/v1/nodes/gpu-node-b/status");
  EXPECT_EQ(path(testing::trainingjobs_resource(), ""), "/apis/tessel.dev/v1alpha1/trainingjobs");
  EXPECT_EQ(path(builtin("", "namespaces"), "", "default"), "/api/v1/namespaces/default");
  EXPECT_EQ(path(builtin("apiextensions.k8s.io", "crd"), "", "trainingjobs.tessel.dev"),
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/trainingjobs.tessel.dev");
}

TEST(ResourcePathTest, RejectsImpossibleCombinations) {
  EXPECT_THROW(path(builtin("", "nodes"), "default", "n"), std::invalid_argument);
  EXPECT_THROW(path(builtin("", "pods"), "", "p"), std::invalid_argument);
  EXPECT_THROW(path(builtin("", "pods"), "default", "", "status"), std::invalid_argument);
}

// Every single-object request of the capture: the registry finds the resource from the
// object's apiVersion/kind, and path() rebuilds the request path.
TEST(ResourcePathTest, RebuildsTheRequestPathsOfTheFixtures) {
  ResourceRegistry registry;
  registry.add(testing::trainingjobs_resource());  // the fixtures' custom resources
  registry.add(testing::memberclusters_resource());
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("200-") || entry.path().extension() != ".json") continue;
    const json pair = fixture(name);
    const json& body = pair.at("response").at("body");
    std::string request_path = pair.at("request").at("path");
    request_path = request_path.substr(0, request_path.find('?'));
    if (!body.is_object() || !body.contains("metadata") || body.value("kind", "") == "Status" ||
        body.value("kind", "").ends_with("List") || body.value("kind", "") == "Table") {
      continue;
    }
    SCOPED_TRACE(name);
    const ResourceInfo* info = registry.find_for(body);
    ASSERT_NE(info, nullptr) << body.value("kind", "");
    const std::string ns = body["metadata"].value("namespace", "");
    const std::string object = body["metadata"].value("name", "");
    const bool status = request_path.ends_with("/status");
    if (pair.at("request").at("method") == "POST") {
      EXPECT_EQ(path(*info, ns), request_path);
    } else {
      EXPECT_EQ(path(*info, ns, object, status ? "status" : ""), request_path);
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

// --- discovery ------------------------------------------------------------------------------

TEST(DiscoveryTest, CoreV1) {
  const auto resources = discovered("api-v1.json");
  const ResourceInfo* pods = find(resources, "pods");
  ASSERT_NE(pods, nullptr);
  EXPECT_EQ(pods->gvr, (GroupVersionResource{"", "v1", "pods"}));
  EXPECT_EQ(pods->kind, "Pod");
  EXPECT_TRUE(pods->namespaced);
  EXPECT_EQ(pods->short_names, std::vector<std::string>{"po"});
  EXPECT_NE(std::find(pods->subresources.begin(), pods->subresources.end(), "status"),
            pods->subresources.end());
  const ResourceInfo* nodes = find(resources, "nodes");
  ASSERT_NE(nodes, nullptr);
  EXPECT_FALSE(nodes->namespaced);
  EXPECT_EQ(find(resources, "pods/status"), nullptr);  // folded into pods
}

TEST(DiscoveryTest, TesselGroup) {
  const auto resources = discovered("apis-tessel.dev-v1alpha1.json");
  ASSERT_EQ(resources.size(), 1u);
  EXPECT_EQ(resources[0].gvr, (GroupVersionResource{"tessel.dev", "v1alpha1", "trainingjobs"}));
  EXPECT_EQ(resources[0].gvr.api_version(), "tessel.dev/v1alpha1");
  EXPECT_EQ(resources[0].kind, "TrainingJob");
  EXPECT_TRUE(resources[0].namespaced);
  EXPECT_EQ(resources[0].short_names, std::vector<std::string>{"tj"});
  EXPECT_EQ(resources[0].subresources, std::vector<std::string>{"status"});
}

// The built-in table says what the v1.26 server (and crds/) say about each resource.
TEST(DiscoveryTest, BuiltinsAgreeWithTheServer) {
  std::vector<ResourceInfo> served;
  for (const char* document :
       {"api-v1.json", "apis-coordination.k8s.io-v1.json", "apis-events.k8s.io-v1.json",
        "apis-apiextensions.k8s.io-v1.json", "apis-tessel.dev-v1alpha1.json"}) {
    const auto resources = discovered(document);
    served.insert(served.end(), resources.begin(), resources.end());
  }
  const auto member_clusters =
      parse_custom_resource_definition(fixture("201-create-crd.json").at("response").at("body"));
  served.insert(served.end(), member_clusters.begin(), member_clusters.end());

  for (const ResourceInfo& builtin_info : builtin_resources()) {
    SCOPED_TRACE(builtin_info.gvr.api_version() + " " + builtin_info.gvr.resource);
    const auto match = std::find_if(served.begin(), served.end(), [&](const ResourceInfo& info) {
      return info.gvr == builtin_info.gvr;
    });
    ASSERT_NE(match, served.end());
    EXPECT_EQ(match->kind, builtin_info.kind);
    EXPECT_EQ(match->namespaced, builtin_info.namespaced);
    for (const std::string& subresource : builtin_info.subresources) {
      EXPECT_NE(std::find(match->subresources.begin(), match->subresources.end(), subresource),
                match->subresources.end())
          << subresource;
    }
  }
}

TEST(DiscoveryTest, CustomResourceDefinition) {
  const auto resources = parse_custom_resource_definition(
      fixture("200-get-crd-established.json").at("response").at("body"));
  ASSERT_EQ(resources.size(), 1u);
  EXPECT_EQ(resources[0].gvr, (GroupVersionResource{"tessel.dev", "v1alpha1", "trainingjobs"}));
  EXPECT_TRUE(resources[0].namespaced);
  EXPECT_EQ(resources[0].subresources, std::vector<std::string>{"status"});
  EXPECT_THROW(parse_custom_resource_definition(json::object()), std::invalid_argument);
}

TEST(DiscoveryTest, RejectsOtherDocuments) {
  EXPECT_THROW(parse_api_resource_list(fixture("discovery/api.json").at("response").at("body")),
               std::invalid_argument);
  EXPECT_THROW(parse_api_resource_list(json::array()), std::invalid_argument);
}

// --- registry -------------------------------------------------------------------------------

TEST(ResourceRegistryTest, LooksUpByKindResourceAndShortName) {
  ResourceRegistry registry;
  EXPECT_EQ(registry.find_kind("v1", "Event")->gvr.group, "");
  EXPECT_EQ(registry.find_kind("events.k8s.io/v1", "Event")->gvr.group, "events.k8s.io");
  EXPECT_EQ(registry.find_kind("v1", "Deployment"), nullptr);
  EXPECT_EQ(registry.find_resource("", "po")->kind, "Pod");
  // kube/ knows no custom resource until one is added (from discovery or a CRD).
  EXPECT_EQ(registry.find_resource("tessel.dev", "tj"), nullptr);
  registry.add(testing::trainingjobs_resource());
  registry.add(testing::memberclusters_resource());
  EXPECT_EQ(registry.find_resource("tessel.dev", "tj")->kind, "TrainingJob");
  EXPECT_FALSE(registry.find_resource("tessel.dev", "memberclusters")->namespaced);
  EXPECT_EQ(registry.find_resource("", "trainingjobs"), nullptr);

  for (ResourceInfo& info : discovered("apis-apps-v1.json")) registry.add(std::move(info));
  const ResourceInfo* deployments = registry.find_kind("apps/v1", "Deployment");
  ASSERT_NE(deployments, nullptr);
  EXPECT_EQ(path(*deployments, "default", "web"),
            "/apis/apps/v1/namespaces/default/deployments/web");

  const std::size_t size = registry.resources().size();
  for (ResourceInfo& info : discovered("api-v1.json")) registry.add(std::move(info));
  EXPECT_GT(registry.resources().size(), size);  // new core resources, builtins replaced
  EXPECT_EQ(std::count_if(registry.resources().begin(), registry.resources().end(),
                          [](const ResourceInfo& info) { return info.gvr.resource == "pods"; }),
            1);
}

// --- queries --------------------------------------------------------------------------------

TEST(QueryTest, PercentEncoding) {
  EXPECT_EQ(percent_encode("tessel.dev/team=llm,app!=x"), "tessel.dev%2Fteam%3Dllm%2Capp%21%3Dx");
  EXPECT_EQ(percent_encode("a b~_-.%"), "a%20b~_-.%25");
  EXPECT_EQ(percent_encode("\xc3\xa9"), "%C3%A9");
  EXPECT_EQ(encode_query({}), "");
  EXPECT_EQ(encode_query({{"fieldManager", "tessel-prober"}, {"force", "true"}}),
            "?fieldManager=tessel-prober&force=true");
}

TEST(QueryTest, ListAndWatchOptions) {
  EXPECT_EQ(query_string({}), "");
  ListOptions list;
  list.label_selector = "nvidia.com/gpu.product=NVIDIA-H200";
  EXPECT_EQ(query_string(list), "?labelSelector=nvidia.com%2Fgpu.product%3DNVIDIA-H200");

  ListOptions page;
  page.field_selector = "metadata.name=gpt-b";
  page.limit = 1;
  page.continue_token = "eyJ2Ijoi+/=";
  page.resource_version = "0";
  page.resource_version_match = "NotOlderThan";
  EXPECT_EQ(query_string(page),
            "?fieldSelector=metadata.name%3Dgpt-b&limit=1&continue=eyJ2Ijoi%2B%2F%3D"
            "&resourceVersion=0&resourceVersionMatch=NotOlderThan");

  ListOptions watch;
  watch.resource_version = "351";
  watch.watch = true;
  watch.allow_watch_bookmarks = true;
  watch.timeout_seconds = 100;
  EXPECT_EQ(query_string(watch),
            "?resourceVersion=351&watch=true&allowWatchBookmarks=true&timeoutSeconds=100");
}

}  // namespace
}  // namespace tessel::kube
