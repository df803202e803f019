#include "tests/support/discovery.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>

#include "kube/base64.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
using tessel::kube::ResourceInfo;
using tessel::kube::ResourceRegistry;

const std::vector<std::string> kAllVerbs = {"create", "delete", "deletecollection", "get",
                                            "list",   "patch",  "update",           "watch"};
// A custom resource's verbs, in the order kube-apiserver lists them.
const std::vector<std::string> kCustomResourceVerbs = {
    "delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"};

struct SubresourceEntry {
  std::string kind;  // "" for the resource's own kind
  std::string group;
  std::string version;
  std::vector<std::string> verbs;
};

// What kube-apiserver v1.26 says about the built-in resources tessel uses.
struct BuiltinResource {
  std::vector<std::string> verbs;
  std::vector<std::string> categories;
  std::string storage_version;  // group/version its objects are stored as, for the hash; ""
                                // for resources that are not stored
  std::map<std::string, SubresourceEntry> subresources;
};

const SubresourceEntry kStatus{"", "", "", {"get", "patch", "update"}};

const std::map<std::pair<std::string, std::string>, BuiltinResource>& builtin_resources() {
  static const std::map<std::pair<std::string, std::string>, BuiltinResource> table = {
      {{"", "configmaps"}, {kAllVerbs, {}, "/v1", {}}},
      {{"", "endpoints"}, {kAllVerbs, {}, "/v1", {}}},
      {{"", "events"}, {kAllVerbs, {}, "/v1", {}}},
      {{"", "namespaces"},
       {{"create", "delete", "get", "list", "patch", "update", "watch"},
        {},
        "/v1",
        {{"status", kStatus}, {"finalize", {"", "", "", {"update"}}}}}},
      {{"", "nodes"}, {kAllVerbs, {}, "/v1", {{"status", kStatus}}}},
      {{"", "pods"},
       {kAllVerbs,
        {"all"},
        "/v1",
        {{"status", kStatus}, {"binding", {"Binding", "", "", {"create"}}}}}},
      {{"", "secrets"}, {kAllVerbs, {}, "/v1", {}}},
      {{"", "serviceaccounts"},
       {kAllVerbs,
        {},
        "/v1",
        {{"token", {"TokenRequest", "authentication.k8s.io", "v1", {"create"}}}}}},
      {{"", "services"}, {kAllVerbs, {"all"}, "/v1", {{"status", kStatus}}}},
      {{"coordination.k8s.io", "leases"}, {kAllVerbs, {}, "coordination.k8s.io/v1", {}}},
      {{"events.k8s.io", "events"}, {kAllVerbs, {}, "/v1", {}}},
      {{"admissionregistration.k8s.io", "validatingwebhookconfigurations"},
       {kAllVerbs, {"api-extensions"}, "admissionregistration.k8s.io/v1", {}}},
      {{"admissionregistration.k8s.io", "mutatingwebhookconfigurations"},
       {kAllVerbs, {"api-extensions"}, "admissionregistration.k8s.io/v1", {}}},
      {{"apps", "deployments"},
       {kAllVerbs,
        {"all"},
        "apps/v1",
        {{"status", kStatus},
         {"scale", {"Scale", "autoscaling", "v1", {"get", "patch", "update"}}}}}},
      {{"apps", "daemonsets"}, {kAllVerbs, {"all"}, "apps/v1", {{"status", kStatus}}}},
      {{"policy", "poddisruptionbudgets"}, {kAllVerbs, {}, "policy/v1", {{"status", kStatus}}}},
      {{"admissionregistration.k8s.io", "validatingadmissionpolicies"},
       {kAllVerbs, {"api-extensions"}, "admissionregistration.k8s.io/v1", {{"status", kStatus}}}},
      {{"admissionregistration.k8s.io", "validatingadmissionpolicybindings"},
       {kAllVerbs, {"api-extensions"}, "admissionregistration.k8s.io/v1", {}}},
      {{"rbac.authorization.k8s.io", "clusterrolebindings"},
       {kAllVerbs, {}, "rbac.authorization.k8s.io/v1", {}}},
      {{"rbac.authorization.k8s.io", "clusterroles"},
       {kAllVerbs, {}, "rbac.authorization.k8s.io/v1", {}}},
      {{"rbac.authorization.k8s.io", "rolebindings"},
       {kAllVerbs, {}, "rbac.authorization.k8s.io/v1", {}}},
      {{"rbac.authorization.k8s.io", "roles"}, {kAllVerbs, {}, "rbac.authorization.k8s.io/v1", {}}},
      // Answered, not stored: no storageVersionHash.
      {{"authorization.k8s.io", "selfsubjectaccessreviews"}, {{"create"}, {}, "", {}}},
      {{"authorization.k8s.io", "selfsubjectrulesreviews"}, {{"create"}, {}, "", {}}},
      {{"apiextensions.k8s.io", "customresourcedefinitions"},
       {kAllVerbs, {"api-extensions"}, "apiextensions.k8s.io/v1beta1", {{"status", kStatus}}}},
  };
  return table;
}

// kube-apiserver's built-in groups in the order /apis lists them.
const std::vector<std::string>& builtin_group_order() {
  static const std::vector<std::string> order = {"apiregistration.k8s.io",
                                                 "apps",
                                                 "events.k8s.io",
                                                 "authentication.k8s.io",
                                                 "authorization.k8s.io",
                                                 "autoscaling",
                                                 "batch",
                                                 "certificates.k8s.io",
                                                 "networking.k8s.io",
                                                 "policy",
                                                 "rbac.authorization.k8s.io",
                                                 "storage.k8s.io",
                                                 "admissionregistration.k8s.io",
                                                 "apiextensions.k8s.io",
                                                 "scheduling.k8s.io",
                                                 "coordination.k8s.io",
                                                 "node.k8s.io",
                                                 "discovery.k8s.io",
                                                 "flowcontrol.apiserver.k8s.io"};
  return order;
}

// storageVersionHash: the first 8 bytes of SHA-256("<group>/<version>/<kind>"), base64.
std::string storage_version_hash(const std::string& group_version, const std::string& kind) {
  const std::string input = group_version + "/" + kind;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  return tessel::kube::base64_encode(std::string(reinterpret_cast<const char*>(digest), 8));
}

// Kubernetes' version priority: GA before beta before alpha, higher numbers first, versions
// that do not look like Kubernetes versions last, by name.
struct KubeVersion {
  bool kube_like = false;
  int major = 0;
  int stability = 0;  // 2 GA, 1 beta, 0 alpha
  int minor = 0;
};

KubeVersion parse_kube_version(const std::string& v) {
  static const std::regex pattern("^v([0-9]+)(?:(alpha|beta)([0-9]+))?$");
  std::smatch m;
  if (!std::regex_match(v, m, pattern)) return {};
  return {true, std::stoi(m[1]),
          !m[2].matched    ? 2
          : m[2] == "beta" ? 1
                           : 0,
          m[3].matched ? std::stoi(m[3]) : 0};
}

bool higher_priority(const std::string& a, const std::string& b) {
  const KubeVersion x = parse_kube_version(a);
  const KubeVersion y = parse_kube_version(b);
  if (x.kube_like != y.kube_like) return x.kube_like;
  if (!x.kube_like) return a < b;
  if (x.stability != y.stability) return x.stability > y.stability;
  if (x.major != y.major) return x.major > y.major;
  return x.minor > y.minor;
}

std::vector<std::string> served_versions(const ResourceRegistry& served, const std::string& group) {
  std::set<std::string> versions;
  for (const auto& info : served.resources()) {
    if (info.gvr.group == group) versions.insert(info.gvr.version);
  }
  std::vector<std::string> out(versions.begin(), versions.end());
  std::sort(out.begin(), out.end(), higher_priority);
  return out;
}

json group_version_entry(const std::string& group, const std::string& version) {
  return {{"groupVersion", group + "/" + version}, {"version", version}};
}

json group_document(const std::string& group, const std::vector<std::string>& versions) {
  json entries = json::array();
  for (const auto& v : versions) entries.push_back(group_version_entry(group, v));
  return {{"name", group},
          {"versions", entries},
          {"preferredVersion", group_version_entry(group, versions.front())}};
}

const json* find_crd(const std::vector<json>& crds, const ResourceInfo& info) {
  for (const auto& crd : crds) {
    const json spec = crd.value("spec", json::object());
    if (spec.value("group", "") == info.gvr.group &&
        spec.value("names", json::object()).value("plural", "") == info.gvr.resource) {
      return &crd;
    }
  }
  return nullptr;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string crd_storage_version(const json* crd, const std::string& fallback) {
  if (crd == nullptr) return fallback;
  for (const auto& v : crd->value("spec", json::object()).value("versions", json::array())) {
    if (v.value("storage", false)) return v.value("name", fallback);
  }
  return fallback;
}

void add_list(json& entry, const char* key, const std::vector<std::string>& values) {
  if (!values.empty()) entry[key] = values;
}

std::vector<std::string> strings_of(const json& value) {
  std::vector<std::string> out;
  if (!value.is_array()) return out;
  for (const auto& v : value) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// The APIResource entries of one resource: itself, then its subresources.
void add_resource_entries(json& resources, const ResourceInfo& info,
                          const std::vector<json>& crds) {
  const auto& builtins = builtin_resources();
  const auto builtin = builtins.find({info.gvr.group, info.gvr.resource});
  json entry = {{"name", info.gvr.resource},
                {"singularName", ""},
                {"namespaced", info.namespaced},
                {"kind", info.kind}};
  std::map<std::string, SubresourceEntry> known_subresources;
  if (builtin != builtins.end()) {
    entry["verbs"] = builtin->second.verbs;
    add_list(entry, "shortNames", info.short_names);
    add_list(entry, "categories", builtin->second.categories);
    if (!builtin->second.storage_version.empty()) {
      entry["storageVersionHash"] =
          storage_version_hash(builtin->second.storage_version, info.kind);
    }
    known_subresources = builtin->second.subresources;
  } else {
    const json* crd = find_crd(crds, info);
    const json names = crd == nullptr
                           ? json::object()
                           : crd->value("spec", json::object()).value("names", json::object());
    entry["singularName"] = names.value("singular", lower(info.kind));
    entry["verbs"] = kCustomResourceVerbs;
    add_list(entry, "shortNames", info.short_names);
    add_list(entry, "categories", strings_of(names.value("categories", json())));
    entry["storageVersionHash"] = storage_version_hash(
        info.gvr.group + "/" + crd_storage_version(crd, info.gvr.version), info.kind);
    known_subresources["status"] = kStatus;
    known_subresources["scale"] = {"Scale", "autoscaling", "v1", {"get", "patch", "update"}};
  }
  resources.push_back(entry);
  for (const auto& sub : info.subresources) {
    const auto known = known_subresources.find(sub);
    if (known == known_subresources.end()) {
      throw std::invalid_argument("discovery: unknown subresource \"" + sub + "\" of " +
                                  info.gvr.resource);
    }
    json sub_entry = {{"name", info.gvr.resource + "/" + sub},
                      {"singularName", ""},
                      {"namespaced", info.namespaced}};
    if (!known->second.group.empty()) {
      sub_entry["group"] = known->second.group;
      sub_entry["version"] = known->second.version;
    }
    sub_entry["kind"] = known->second.kind.empty() ? info.kind : known->second.kind;
    sub_entry["verbs"] = known->second.verbs;
    resources.push_back(sub_entry);
  }
}

}  // namespace

json version_document(const std::string& git_version) {
  static const std::regex pattern("^v([0-9]+)\\.([0-9]+)(\\..*)?$");
  std::smatch m;
  if (!std::regex_match(git_version, m, pattern)) {
    throw std::invalid_argument("git version \"" + git_version +
                                "\" is not of the form v<major>.<minor>[.<patch>]");
  }
  return {{"major", m[1].str()},       {"minor", m[2].str()},
          {"gitVersion", git_version}, {"gitCommit", std::string(40, '0')},
          {"gitTreeState", "clean"},   {"buildDate", "1970-01-01T00:00:00Z"},
          {"goVersion", "go1.19.8"},   {"compiler", "gc"},
          {"platform", "linux/amd64"}};
}

json core_api_versions() { return {{"kind", "APIVersions"}, {"versions", {"v1"}}}; }

json core_api_versions(const std::string& server_address) {
  json out = core_api_versions();
  out["serverAddressByClientCIDRs"] =
      json::array({{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}});
  return out;
}

json api_group_list(const ResourceRegistry& served) {
  std::set<std::string> groups;
  for (const auto& info : served.resources()) {
    if (!info.gvr.group.empty()) groups.insert(info.gvr.group);
  }
  std::vector<std::string> ordered;
  for (const auto& g : builtin_group_order()) {
    if (groups.erase(g) > 0) ordered.push_back(g);
  }
  ordered.insert(ordered.end(), groups.begin(), groups.end());
  json list = json::array();
  for (const auto& g : ordered) list.push_back(group_document(g, served_versions(served, g)));
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", list}};
}

json api_group(const ResourceRegistry& served, const std::string& group) {
  if (group.empty()) return nullptr;
  const auto versions = served_versions(served, group);
  if (versions.empty()) return nullptr;
  json out = {{"kind", "APIGroup"}, {"apiVersion", "v1"}};
  out.update(group_document(group, versions));
  return out;
}

json api_resource_list(const ResourceRegistry& served, const std::string& group,
                       const std::string& version) {
  return api_resource_list(served, {}, group, version);
}

json api_resource_list(const ResourceRegistry& served, const std::vector<json>& crds,
                       const std::string& group, const std::string& version) {
  std::vector<const ResourceInfo*> infos;
  for (const auto& info : served.resources()) {
    if (info.gvr.group == group && info.gvr.version == version) infos.push_back(&info);
  }
  if (infos.empty()) return nullptr;
  json resources = json::array();
  for (const auto* info : infos) add_resource_entries(resources, *info, crds);
  std::sort(resources.begin(), resources.end(),
            [](const json& a, const json& b) { return a["name"] < b["name"]; });
  json out = {{"kind", "APIResourceList"}};
  if (!group.empty()) out["apiVersion"] = "v1";
  out["groupVersion"] = group.empty() ? version : group + "/" + version;
  out["resources"] = resources;
  return out;
}

}  // namespace tessel::testing
