// Group/version/resource mapping: which REST path serves a kind, whether it is namespaced,
// and the URL query of list and watch requests.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::kube {

struct GroupVersionResource {
  std::string group;  // "" for the core group
  std::string version;
  std::string resource;  // plural, lower case: "pods", "trainingjobs"

  std::string api_version() const;  // "v1" for core, else "group/version"
  friend bool operator==(const GroupVersionResource&, const GroupVersionResource&) = default;
};

struct ResourceInfo {
  GroupVersionResource gvr;
  std::string kind;
  bool namespaced = true;
  std::vector<std::string> short_names;   // "tj", "po"
  std::vector<std::string> subresources;  // "status", ...
};

// What tessel talks to: core/v1 namespaces, nodes, pods, services, configmaps, secrets,
// events, serviceaccounts; coordination.k8s.io/v1 leases; events.k8s.io/v1 events;
// apiextensions.k8s.io/v1 customresourcedefinitions, as the v1.26 server defines them. Custom
// resources are not built in: a client learns them from discovery, or its user adds them from
// their CRD (parse_custom_resource_definition; the operator does so from crds/).
const std::vector<ResourceInfo>& builtin_resources();

// The resources of one discovery document (GET /api/v1, /apis/<group>/<version>: an
// APIResourceList). Subresource entries ("pods/status") are folded into their resource's
// subresources. Throws std::invalid_argument when the document is not an APIResourceList.
std::vector<ResourceInfo> parse_api_resource_list(const nlohmann::json& document);

// The resources a CustomResourceDefinition serves, one per served version.
std::vector<ResourceInfo> parse_custom_resource_definition(const nlohmann::json& crd);

// Lookup table, starting from builtin_resources(). Not synchronised: fill it, then share it
// read-only.
class ResourceRegistry {
 public:
  ResourceRegistry();

  // Adds a resource, replacing one with the same group/version/resource.
  void add(ResourceInfo info);

  // By apiVersion ("v1", "tessel.dev/v1alpha1") and kind ("Pod").
  const ResourceInfo* find_kind(std::string_view api_version, std::string_view kind) const;
  // By the object's own apiVersion and kind.
  const ResourceInfo* find_for(const nlohmann::json& obj) const;
  // By group and plural or short name ("", "po"), first registered version; nullptr if none.
  const ResourceInfo* find_resource(std::string_view group, std::string_view name) const;

  const std::vector<ResourceInfo>& resources() const { return resources_; }

 private:
  std::vector<ResourceInfo> resources_;
};

// The REST path of a collection, an object or an object's subresource:
//   /api/v1/namespaces/default/pods/p/status, /apis/tessel.dev/v1alpha1/memberclusters/m.
// A namespaced resource with an empty namespace_ names the all-namespaces collection. Throws
// std::invalid_argument for a namespace on a cluster-scoped resource, an object name without
// its namespace, or a subresource without a name.
std::string path(const ResourceInfo& info, const std::string& namespace_,
                 const std::string& name = "", const std::string& subresource = "");

// RFC 3986 percent-encoding of everything but the unreserved characters A-Z a-z 0-9 - . _ ~.
std::string percent_encode(std::string_view text);

// "?k1=v1&k2=v2" with keys and values percent-encoded; "" for no parameters.
std::string encode_query(const std::vector<std::pair<std::string, std::string>>& parameters);

// The query parameters of list and watch. Empty strings and unset optionals are left out.
struct ListOptions {
  std::string label_selector;  // LabelSelector::to_string() form
  std::string field_selector;  // FieldSelector::to_string() form
  std::optional<std::int64_t> limit;
  std::string continue_token;
  std::string resource_version;        // "0": any version (served from the watch cache)
  std::string resource_version_match;  // "NotOlderThan" or "Exact"
  bool watch = false;
  bool allow_watch_bookmarks = false;
  std::optional<std::int64_t> timeout_seconds;
};

std::string query_string(const ListOptions& options);

}  // namespace tessel::kube
