#include "tests/support/api_builtin_resources.h"

#include <openssl/sha.h>

#include <algorithm>
#include <stdexcept>

#include "kube/base64.h"
#include "tests/support/api_builtin_resources_text.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

// The discovery documents of the groups the fixtures did not capture, as kube-apiserver v1.26
// lists them (pkg/registry/*/rest storage: verbs, shortNames, categories; storageVersionHash
// computed as kube-apiserver computes it), admissionregistration.k8s.io/v1 with the
// ValidatingAdmissionPolicy kinds as v1.30 made them GA. Written by hand, not captured.
const char* const kUncaptured = R"json([
 {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "rbac.authorization.k8s.io/v1", "resources": [
  {"name": "clusterrolebindings", "singularName": "", "namespaced": false, "kind": "ClusterRoleBinding", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "storageVersionHash": "48tpQ8gZHFc="},
  {"name": "clusterroles", "singularName": "", "namespaced": false, "kind": "ClusterRole", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "storageVersionHash": "bYE5ZWDrJ44="},
  {"name": "rolebindings", "singularName": "", "namespaced": true, "kind": "RoleBinding", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "storageVersionHash": "eGsCzGH6b1g="},
  {"name": "roles", "singularName": "", "namespaced": true, "kind": "Role", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "storageVersionHash": "7FuwZcIIItM="}
 ]},
 {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "admissionregistration.k8s.io/v1", "resources": [
  {"name": "mutatingwebhookconfigurations", "singularName": "", "namespaced": false, "kind": "MutatingWebhookConfiguration", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "categories": ["api-extensions"], "storageVersionHash": "Sqi0GUgDaX0="},
  {"name": "validatingadmissionpolicies", "singularName": "", "namespaced": false, "kind": "ValidatingAdmissionPolicy", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "categories": ["api-extensions"], "storageVersionHash": "6OxvlMmQ6is="},
  {"name": "validatingadmissionpolicies/status", "singularName": "", "namespaced": false, "kind": "ValidatingAdmissionPolicy", "verbs": ["get", "patch", "update"]},
  {"name": "validatingadmissionpolicybindings", "singularName": "", "namespaced": false, "kind": "ValidatingAdmissionPolicyBinding", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "categories": ["api-extensions"], "storageVersionHash": "v9715VZqakg="},
  {"name": "validatingwebhookconfigurations", "singularName": "", "namespaced": false, "kind": "ValidatingWebhookConfiguration", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "categories": ["api-extensions"], "storageVersionHash": "B0wHjQmsGNk="}
 ]},
 {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "policy/v1", "resources": [
  {"name": "poddisruptionbudgets", "singularName": "", "namespaced": true, "kind": "PodDisruptionBudget", "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "shortNames": ["pdb"], "storageVersionHash": "EVWiDmWqyJw="},
  {"name": "poddisruptionbudgets/status", "singularName": "", "namespaced": true, "kind": "PodDisruptionBudget", "verbs": ["get", "patch", "update"]}
 ]},
 {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "authorization.k8s.io/v1", "resources": [
  {"name": "selfsubjectaccessreviews", "singularName": "", "namespaced": false, "kind": "SelfSubjectAccessReview", "verbs": ["create"]},
  {"name": "selfsubjectrulesreviews", "singularName": "", "namespaced": false, "kind": "SelfSubjectRulesReview", "verbs": ["create"]}
 ]}
])json";

// What the test server implements of those documents: the resources and the subresources it
// serves (not pods/log, pods/exec, ...: listing them would promise endpoints it lacks).
struct Served {
  std::string group;
  std::string resource;
  std::vector<std::string> subresources;
};

const std::vector<Served>& served() {
  static const std::vector<Served> table = {
      // What tessel's operator, prober and stage pods use, and what kubectl reads with them.
      {"", "namespaces", {"finalize", "status"}},
      {"", "nodes", {"status"}},
      {"", "pods", {"binding", "status"}},
      {"", "services", {"status"}},
      {"", "configmaps", {}},
      {"", "secrets", {}},
      {"", "events", {}},
      {"", "serviceaccounts", {"token"}},
      {"coordination.k8s.io", "leases", {}},
      {"events.k8s.io", "events", {}},
      {"apiextensions.k8s.io", "customresourcedefinitions", {"status"}},
      // Admission webhooks (api_admission_config.h): their configurations, and the Endpoints a
      // webhook's clientConfig.service is reached through.
      {"", "endpoints", {}},
      {"admissionregistration.k8s.io", "validatingwebhookconfigurations", {}},
      {"admissionregistration.k8s.io", "mutatingwebhookconfigurations", {}},
      // What an installation of tessel writes (helm/tessel, helm/tessel-member): stored objects
      // with their defaults and validation, no controller acting on them
      // (builtin_semantics_apps.cpp, builtin_semantics_rbac.cpp,
      // builtin_semantics_admission_policy.cpp); deployments/scale is api_scale.h.
      {"apps", "deployments", {"scale", "status"}},
      {"apps", "daemonsets", {"status"}},
      {"policy", "poddisruptionbudgets", {"status"}},
      {"admissionregistration.k8s.io", "validatingadmissionpolicies", {"status"}},
      {"admissionregistration.k8s.io", "validatingadmissionpolicybindings", {}},
      {"rbac.authorization.k8s.io", "clusterrolebindings", {}},
      {"rbac.authorization.k8s.io", "clusterroles", {}},
      {"rbac.authorization.k8s.io", "rolebindings", {}},
      {"rbac.authorization.k8s.io", "roles", {}},
      // What `kubectl auth can-i [--list]` creates: answered, never stored
      // (api_access_review.h).
      {"authorization.k8s.io", "selfsubjectaccessreviews", {}},
      {"authorization.k8s.io", "selfsubjectrulesreviews", {}},
  };
  return table;
}

std::vector<std::string> strings(const json& entry, const char* key) {
  std::vector<std::string> out;
  const auto found = entry.find(key);
  if (found == entry.end()) return out;
  if (!found->is_array()) throw std::invalid_argument(std::string(key) + " is not a list");
  for (const json& value : *found) out.push_back(value.get<std::string>());
  return out;
}

std::string text(const json& entry, const char* key) {
  const auto found = entry.find(key);
  if (found == entry.end()) return "";
  if (!found->is_string()) throw std::invalid_argument(std::string(key) + " is not a string");
  return found->get<std::string>();
}

void add_list(json& entry, const char* key, const std::vector<std::string>& values) {
  if (!values.empty()) entry[key] = values;
}

}  // namespace

bool ApiResource::has_subresource(const std::string& name) const {
  return std::any_of(subresources.begin(), subresources.end(),
                     [&](const ApiSubresource& s) { return s.name == name; });
}

std::vector<ApiResource> parse_resource_list(const json& document) {
  if (!document.is_object() || document.value("kind", "") != "APIResourceList") {
    throw std::invalid_argument("discovery document: kind is not APIResourceList");
  }
  const std::string group_version = text(document, "groupVersion");
  if (group_version.empty()) throw std::invalid_argument("APIResourceList without groupVersion");
  const std::size_t slash = group_version.find('/');
  const std::string group = slash == std::string::npos ? "" : group_version.substr(0, slash);
  const std::string version = group_version.substr(slash == std::string::npos ? 0 : slash + 1);
  std::vector<ApiResource> resources;
  std::vector<std::pair<std::string, ApiSubresource>> subresources;  // (resource, entry)
  for (const json& entry : document.value("resources", json::array())) {
    const std::string name = text(entry, "name");
    if (name.empty()) throw std::invalid_argument(group_version + ": a resource without a name");
    try {
      if (const std::size_t sub = name.find('/'); sub != std::string::npos) {
        subresources.push_back({name.substr(0, sub),
                                {name.substr(sub + 1), text(entry, "kind"), text(entry, "group"),
                                 text(entry, "version"), strings(entry, "verbs")}});
        continue;
      }
      resources.push_back({group,
                           version,
                           name,
                           text(entry, "kind"),
                           entry.value("namespaced", false),
                           text(entry, "singularName"),
                           strings(entry, "verbs"),
                           strings(entry, "shortNames"),
                           strings(entry, "categories"),
                           text(entry, "storageVersionHash"),
                           {}});
    } catch (const nlohmann::json::exception& error) {
      throw std::invalid_argument(group_version + " " + name + ": " + error.what());
    }
  }
  for (auto& [owner, subresource] : subresources) {
    const auto resource = std::find_if(resources.begin(), resources.end(),
                                       [&](const ApiResource& r) { return r.resource == owner; });
    if (resource == resources.end()) {
      throw std::invalid_argument(group_version + ": subresource " + owner + "/" +
                                  subresource.name + " of no listed resource");
    }
    resource->subresources.push_back(std::move(subresource));
  }
  return resources;
}

std::vector<json> resource_list_entries(const ApiResource& resource) {
  json entry = {{"name", resource.resource},
                {"singularName", resource.singular_name},
                {"namespaced", resource.namespaced},
                {"kind", resource.kind},
                {"verbs", resource.verbs}};
  add_list(entry, "shortNames", resource.short_names);
  add_list(entry, "categories", resource.categories);
  if (!resource.storage_version_hash.empty()) {
    entry["storageVersionHash"] = resource.storage_version_hash;
  }
  std::vector<json> entries = {entry};
  for (const ApiSubresource& sub : resource.subresources) {
    json sub_entry = {{"name", resource.resource + "/" + sub.name},
                      {"singularName", ""},
                      {"namespaced", resource.namespaced},
                      {"kind", sub.kind},
                      {"verbs", sub.verbs}};
    if (!sub.group.empty()) sub_entry["group"] = sub.group;
    if (!sub.version.empty()) sub_entry["version"] = sub.version;
    entries.push_back(sub_entry);
  }
  return entries;
}

const std::vector<ApiResource>& served_builtin_resources() {
  static const std::vector<ApiResource> resources = [] {
    std::vector<ApiResource> listed;
    json documents = captured_resource_lists();
    for (const json& document : json::parse(kUncaptured)) documents.push_back(document);
    for (const json& document : documents) {
      for (ApiResource& resource : parse_resource_list(document)) {
        listed.push_back(std::move(resource));
      }
    }
    std::vector<ApiResource> out;
    for (const Served& wanted : served()) {
      const auto found = std::find_if(listed.begin(), listed.end(), [&](const ApiResource& r) {
        return r.group == wanted.group && r.resource == wanted.resource;
      });
      if (found == listed.end()) {
        throw std::logic_error("no discovery document lists " + wanted.resource + " of group \"" +
                               wanted.group + "\"");
      }
      ApiResource resource = *found;
      resource.subresources.clear();
      for (const std::string& name : wanted.subresources) {
        const auto sub = std::find_if(found->subresources.begin(), found->subresources.end(),
                                      [&](const ApiSubresource& s) { return s.name == name; });
        if (sub == found->subresources.end()) {
          throw std::logic_error("no discovery document lists " + wanted.resource + "/" + name);
        }
        resource.subresources.push_back(*sub);
      }
      out.push_back(std::move(resource));
    }
    return out;
  }();
  return resources;
}

const ApiResource& served_builtin_resource(const std::string& group, const std::string& resource) {
  for (const ApiResource& served : served_builtin_resources()) {
    if (served.group == group && served.resource == resource) return served;
  }
  throw std::out_of_range("the test server serves no built-in resource " + resource +
                          " of group \"" + group + "\"");
}

std::string storage_version_hash(const std::string& group_version, const std::string& kind) {
  const std::string input = group_version + "/" + kind;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  return kube::base64_encode(std::string(reinterpret_cast<const char*>(digest), 8));
}

}  // namespace tessel::testing
