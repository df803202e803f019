#include "tests/support/discovery.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>

namespace tessel::testing {
namespace {

using json = nlohmann::json;

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

std::vector<std::string> served_versions(const std::vector<ApiResource>& served,
                                         const std::string& group) {
  std::set<std::string> versions;
  for (const auto& info : served) {
    if (info.group == group) versions.insert(info.version);
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

json api_group_list(const std::vector<ApiResource>& served) {
  std::set<std::string> groups;
  for (const auto& info : served) {
    if (!info.group.empty()) groups.insert(info.group);
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

json api_group(const std::vector<ApiResource>& served, const std::string& group) {
  if (group.empty()) return nullptr;
  const auto versions = served_versions(served, group);
  if (versions.empty()) return nullptr;
  json out = {{"kind", "APIGroup"}, {"apiVersion", "v1"}};
  out.update(group_document(group, versions));
  return out;
}

json api_resource_list(const std::vector<ApiResource>& served, const std::string& group,
                       const std::string& version) {
  json resources = json::array();
  for (const ApiResource& info : served) {
    if (info.group != group || info.version != version) continue;
    for (json& entry : resource_list_entries(info)) resources.push_back(std::move(entry));
  }
  if (resources.empty()) return nullptr;
  std::sort(resources.begin(), resources.end(),
            [](const json& a, const json& b) { return a["name"] < b["name"]; });
  json out = {{"kind", "APIResourceList"}};
  if (!group.empty()) out["apiVersion"] = "v1";
  out["groupVersion"] = group.empty() ? version : group + "/" + version;
  out["resources"] = resources;
  return out;
}

}  // namespace tessel::testing
