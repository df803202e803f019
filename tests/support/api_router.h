// Reading a request to the Kubernetes API test server: what its path names (a resource, a
// discovery document, OpenAPI, /version, a health check), what its query asks for, and which
// representation its Accept header wants.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tests/support/http_server.h"

namespace tessel::testing {

struct ApiPath {
  enum class Type {
    kResource,      // /api/v1/..., /apis/<group>/<version>/<resource>...
    kCoreGroup,     // /api
    kGroupList,     // /apis
    kGroup,         // /apis/<group>
    kGroupVersion,  // /api/v1, /apis/<group>/<version>
    kVersion,       // /version
    kHealth,        // /healthz, /livez, /readyz (and their /<check> paths)
    kOpenApi,       // /openapi/v2, /openapi/v3...
    kUnknown,       // answered "404 page not found"
  };
  Type type = Type::kUnknown;
  std::string group;  // "" for the core group
  std::string version;
  std::string namespace_;  // "" for cluster-scoped paths and all-namespaces collections
  std::string resource;    // plural
  std::string name;        // "" for a collection
  std::string subresource;

  bool is_collection() const { return name.empty(); }
};

// Parses a percent-decoded path. /api/v1/namespaces/<ns> is the namespace object itself (with
// its status and finalize subresources); /api/v1/namespaces/<ns>/<resource>... is inside it.
ApiPath parse_api_path(std::string_view path);

// The query parameters of a resource request, checked. Parsing throws ApiError (400) naming
// the parameter at fault.
struct RequestOptions {
  std::string label_selector;
  std::string field_selector;
  std::optional<std::int64_t> limit;  // absent or 0: no limit
  std::string continue_token;
  std::optional<std::string> resource_version;  // absent: not given
  std::string resource_version_match;           // "", "NotOlderThan", "Exact"
  bool watch = false;
  bool allow_watch_bookmarks = false;
  std::optional<std::int64_t> timeout_seconds;
  bool dry_run = false;  // dryRun=All
  std::string field_manager;
  std::string field_validation;  // "Ignore", "Warn" (the default), "Strict"
  std::optional<bool> force;
  std::optional<std::int64_t> grace_period_seconds;
  std::string propagation_policy;  // "Foreground", "Background", "Orphan" or ""
  std::optional<bool> orphan_dependents;
  std::string include_object;  // Table rows: "None", "Metadata", "Object" or ""
};

RequestOptions parse_request_options(const HttpServerRequest& request);

// The representation an Accept header asks for, in its order of preference.
struct Representation {
  enum class Type { kJson, kTable, kPartialObjectMetadata };
  Type type = Type::kJson;
  std::string api_version;  // meta.k8s.io/v1 or meta.k8s.io/v1beta1 for Table and metadata
};
// Throws ApiError 406 when nothing the header lists can be served. `allow_conversions`:
// whether Table and PartialObjectMetadata may be served (GET, LIST and WATCH only).
Representation negotiate_representation(const HttpServerRequest& request, bool allow_conversions);

// The media type of Content-Type without parameters, lower case ("application/json").
std::string media_type(const HttpServerRequest& request);

}  // namespace tessel::testing
