#include "tests/support/api_router.h"

#include <gtest/gtest.h>

#include "tests/support/api_errors.h"

namespace tessel::testing {
namespace {

using Type = ApiPath::Type;

HttpServerRequest request_with(std::vector<std::pair<std::string, std::string>> query,
                               std::string accept = "") {
  HttpServerRequest request;
  request.method = "GET";
  request.query = std::move(query);
  if (!accept.empty()) request.headers.set("Accept", accept);
  return request;
}

int status_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const ApiError& error) {
    return error.http_status();
  }
  return 0;
}

TEST(ApiPath, NamesResourcesOfEveryShape) {
  ApiPath path =
      parse_api_path("/apis/tessel.dev/v1alpha1/namespaces/default/trainingjobs/x/status");
  EXPECT_EQ(path.type, Type::kResource);
  EXPECT_EQ(path.group, "tessel.dev");
  EXPECT_EQ(path.version, "v1alpha1");
  EXPECT_EQ(path.namespace_, "default");
  EXPECT_EQ(path.resource, "trainingjobs");
  EXPECT_EQ(path.name, "x");
  EXPECT_EQ(path.subresource, "status");

  path = parse_api_path("/api/v1/pods");
  EXPECT_EQ(path.type, Type::kResource);
  EXPECT_EQ(path.group, "");
  EXPECT_EQ(path.namespace_, "");
  EXPECT_TRUE(path.is_collection());

  path = parse_api_path("/api/v1/nodes/gpu-node-a/status");
  EXPECT_EQ(path.resource, "nodes");
  EXPECT_EQ(path.name, "gpu-node-a");
  EXPECT_EQ(path.subresource, "status");
}

TEST(ApiPath, TellsTheNamespaceObjectFromItsContents) {
  ApiPath path = parse_api_path("/api/v1/namespaces/tessel-system");
  EXPECT_EQ(path.resource, "namespaces");
  EXPECT_EQ(path.name, "tessel-system");
  EXPECT_EQ(path.namespace_, "");

  path = parse_api_path("/api/v1/namespaces/tessel-system/finalize");
  EXPECT_EQ(path.resource, "namespaces");
  EXPECT_EQ(path.subresource, "finalize");

  path = parse_api_path("/api/v1/namespaces/tessel-system/configmaps");
  EXPECT_EQ(path.resource, "configmaps");
  EXPECT_EQ(path.namespace_, "tessel-system");
  EXPECT_TRUE(path.is_collection());
}

TEST(ApiPath, NamesDiscoveryAndOtherEndpoints) {
  EXPECT_EQ(parse_api_path("/api").type, Type::kCoreGroup);
  EXPECT_EQ(parse_api_path("/apis").type, Type::kGroupList);
  EXPECT_EQ(parse_api_path("/apis/tessel.dev").type, Type::kGroup);
  EXPECT_EQ(parse_api_path("/api/v1").type, Type::kGroupVersion);
  EXPECT_EQ(parse_api_path("/apis/tessel.dev/v1alpha1").type, Type::kGroupVersion);
  EXPECT_EQ(parse_api_path("/version").type, Type::kVersion);
  EXPECT_EQ(parse_api_path("/readyz").type, Type::kHealth);
  EXPECT_EQ(parse_api_path("/livez/ping").type, Type::kHealth);
  EXPECT_EQ(parse_api_path("/openapi/v3/apis/tessel.dev/v1alpha1").type, Type::kOpenApi);
  EXPECT_EQ(parse_api_path("/foo/bar").type, Type::kUnknown);
  EXPECT_EQ(parse_api_path("/api/v2/pods").type, Type::kUnknown);
  EXPECT_EQ(parse_api_path("/api/v1/namespaces/a/pods/b/status/extra").type, Type::kUnknown);
}

TEST(RequestOptions, ReadsTheQuery) {
  const RequestOptions options = parse_request_options(request_with({
      {"labelSelector", "app=x"},
      {"fieldSelector", "metadata.name=y"},
      {"limit", "500"},
      {"resourceVersion", "0"},
      {"watch", "true"},
      {"allowWatchBookmarks", "1"},
      {"timeoutSeconds", "588"},
      {"dryRun", "All"},
      {"fieldManager", "kubectl"},
      {"fieldValidation", "Strict"},
      {"force", "false"},
      {"gracePeriodSeconds", "0"},
      {"propagationPolicy", "Foreground"},
      {"includeObject", "None"},
  }));
  EXPECT_EQ(options.label_selector, "app=x");
  EXPECT_EQ(options.field_selector, "metadata.name=y");
  EXPECT_EQ(options.limit, 500);
  EXPECT_EQ(options.resource_version, "0");
  EXPECT_TRUE(options.watch);
  EXPECT_TRUE(options.allow_watch_bookmarks);
  EXPECT_EQ(options.timeout_seconds, 588);
  EXPECT_TRUE(options.dry_run);
  EXPECT_EQ(options.field_manager, "kubectl");
  EXPECT_EQ(options.field_validation, "Strict");
  EXPECT_EQ(options.force, false);
  EXPECT_EQ(options.grace_period_seconds, 0);
  EXPECT_EQ(options.propagation_policy, "Foreground");
  EXPECT_EQ(options.include_object, "None");
}

TEST(RequestOptions, RefusesMalformedValuesNamingTheParameter) {
  try {
    parse_request_options(request_with({{"limit", "ten"}}));
    FAIL() << "no error";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.http_status(), 400);
    EXPECT_NE(std::string(error.what()).find("limit"), std::string::npos);
  }
  EXPECT_EQ(status_of([] { parse_request_options(request_with({{"dryRun", "Some"}})); }), 400);
  EXPECT_EQ(status_of([] {
              parse_request_options(request_with({{"fieldValidation", "x"}}));
            }),
            400);
  EXPECT_EQ(status_of([] { parse_request_options(request_with({{"watch", "maybe"}})); }), 400);
  EXPECT_EQ(status_of([] {
              parse_request_options(request_with({{"resourceVersionMatch", "Exact"}}));
            }),
            400);
}

TEST(Representation, FollowsTheAcceptHeader) {
  using RType = Representation::Type;
  EXPECT_EQ(negotiate_representation(request_with({}), true).type, RType::kJson);
  EXPECT_EQ(negotiate_representation(request_with({}, "application/json, */*"), true).type,
            RType::kJson);
  const Representation table = negotiate_representation(
      request_with({},
                   "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;"
                   "v=v1beta1;g=meta.k8s.io,application/json"),
      true);
  EXPECT_EQ(table.type, RType::kTable);
  EXPECT_EQ(table.api_version, "meta.k8s.io/v1");
  EXPECT_EQ(negotiate_representation(
                request_with({}, "application/vnd.kubernetes.protobuf,application/json"), true)
                .type,
            RType::kJson);
  EXPECT_EQ(
      negotiate_representation(
          request_with({}, "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"),
          true)
          .type,
      RType::kPartialObjectMetadata);
}

TEST(Representation, AnUnknownTableVersionAloneIsNotAcceptable) {
  // fixture 406-table-unsupported-version.json
  try {
    negotiate_representation(request_with({}, "application/json;as=Table;v=v9;g=meta.k8s.io"),
                             true);
    FAIL() << "no error";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.http_status(), 406);
    EXPECT_EQ(error.body()["message"],
              "only the following media types are accepted: application/json, application/yaml, "
              "application/vnd.kubernetes.protobuf");
  }
  EXPECT_EQ(status_of([] {
              negotiate_representation(
                  request_with({}, "application/json;as=Table;v=v1;g=meta.k8s.io"), false);
            }),
            406);
}

TEST(MediaType, DropsParameters) {
  HttpServerRequest request;
  request.headers.set("Content-Type", "Application/Merge-Patch+JSON; charset=utf-8");
  EXPECT_EQ(media_type(request), "application/merge-patch+json");
}

}  // namespace
}  // namespace tessel::testing
