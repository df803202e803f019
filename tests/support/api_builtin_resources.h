// The resources of the API test server: one entry per resource as discovery describes it (an
// APIResource of an APIResourceList, its subresources folded in), and the built-in ones it
// serves, read from a real kube-apiserver v1.26's discovery documents (captured where the
// fixtures have them: core/v1, apps/v1, apiextensions.k8s.io/v1, coordination.k8s.io/v1,
// events.k8s.io/v1; written from kube-apiserver's sources for rbac.authorization.k8s.io/v1,
// admissionregistration.k8s.io/v1, policy/v1 and authorization.k8s.io/v1). The server's own
// list, independent of kube/'s client code.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::testing {

struct ApiSubresource {
  std::string name;     // "status", "scale", "token"
  std::string kind;     // "Pod", "Scale", "TokenRequest"
  std::string group;    // "" unless it serves another group's kind ("autoscaling")
  std::string version;  // "" unless it serves another group's kind ("v1")
  std::vector<std::string> verbs;

  bool operator==(const ApiSubresource&) const = default;
};

struct ApiResource {
  std::string group;  // "" for the core group
  std::string version;
  std::string resource;  // plural, lower case: "pods"
  std::string kind;
  bool namespaced = true;
  std::string singular_name;  // "" for built-in resources (v1.26 leaves it empty)
  std::vector<std::string> verbs;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::string storage_version_hash;  // "" for resources that are not stored
  std::vector<ApiSubresource> subresources;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  bool has_subresource(const std::string& name) const;
  bool operator==(const ApiResource&) const = default;
};

// The resources of one APIResourceList document ("pods/status" entries folded into "pods").
// Throws std::invalid_argument naming what is missing when the document is not one.
std::vector<ApiResource> parse_resource_list(const nlohmann::json& document);

// An APIResourceList entry and its subresources' entries, as kube-apiserver writes them.
std::vector<nlohmann::json> resource_list_entries(const ApiResource& resource);

// The built-in resources the test server serves, with only the subresources it serves.
const std::vector<ApiResource>& served_builtin_resources();
// One of them by group and plural; throws std::out_of_range naming it when not served.
const ApiResource& served_builtin_resource(const std::string& group, const std::string& resource);

// storageVersionHash: the first 8 bytes of SHA-256("<group>/<version>/<kind>"), base64.
std::string storage_version_hash(const std::string& group_version, const std::string& kind);

}  // namespace tessel::testing
