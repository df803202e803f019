#include "kube/resource.h"

#include <algorithm>
#include <stdexcept>

namespace tessel::kube {
namespace {

using nlohmann::json;

ResourceInfo make_info(std::string group, std::string version, std::string resource,
                       std::string kind, bool namespaced, std::vector<std::string> short_names,
                       std::vector<std::string> subresources = {}) {
  return ResourceInfo{{std::move(group), std::move(version), std::move(resource)},
                      std::move(kind),
                      namespaced,
                      std::move(short_names),
                      std::move(subresources)};
}

std::vector<std::string> string_list(const json& value) {
  std::vector<std::string> result;
  if (!value.is_array()) return result;
  for (const json& entry : value) {
    if (entry.is_string()) result.push_back(entry.get<std::string>());
  }
  return result;
}

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

std::string GroupVersionResource::api_version() const {
  return group.empty() ? version : group + "/" + version;
}

const std::vector<ResourceInfo>& builtin_resources() {
  static const std::vector<ResourceInfo> kBuiltins = {
      make_info("", "v1", "namespaces", "Namespace", false, {"ns"}, {"status"}),
      make_info("", "v1", "nodes", "Node", false, {"no"}, {"status"}),
      make_info("", "v1", "pods", "Pod", true, {"po"}, {"status", "binding"}),
      make_info("", "v1", "services", "Service", true, {"svc"}, {"status"}),
      make_info("", "v1", "configmaps", "ConfigMap", true, {"cm"}),
      make_info("", "v1", "secrets", "Secret", true, {}),
      make_info("", "v1", "events", "Event", true, {"ev"}),
      make_info("", "v1", "serviceaccounts", "ServiceAccount", true, {"sa"}, {"token"}),
      make_info("coordination.k8s.io", "v1", "leases", "Lease", true, {}),
      make_info("events.k8s.io", "v1", "events", "Event", true, {"ev"}),
      make_info("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                "CustomResourceDefinition", false, {"crd", "crds"}, {"status"}),
  };
  return kBuiltins;
}

std::vector<ResourceInfo> parse_api_resource_list(const json& document) {
  if (!document.is_object() || document.value("kind", "") != "APIResourceList" ||
      !document.contains("groupVersion") || !document["groupVersion"].is_string()) {
    throw std::invalid_argument("not an APIResourceList document");
  }
  const std::string group_version = document["groupVersion"].get<std::string>();
  const auto slash = group_version.find('/');
  const std::string group = slash == std::string::npos ? "" : group_version.substr(0, slash);
  const std::string version =
      slash == std::string::npos ? group_version : group_version.substr(slash + 1);

  std::vector<ResourceInfo> result;
  std::vector<std::pair<std::string, std::string>> subresources;  // (resource, subresource)
  for (const json& entry : document.value("resources", json::array())) {
    const std::string name = entry.value("name", "");
    if (name.empty()) continue;
    if (const auto sub = name.find('/'); sub != std::string::npos) {
      subresources.emplace_back(name.substr(0, sub), name.substr(sub + 1));
      continue;
    }
    result.push_back(make_info(group, version, name, entry.value("kind", ""),
                               entry.value("namespaced", false),
                               string_list(entry.value("shortNames", json()))));
  }
  for (const auto& [resource, subresource] : subresources) {
    for (ResourceInfo& info : result) {
      if (info.gvr.resource == resource) info.subresources.push_back(subresource);
    }
  }
  return result;
}

std::vector<ResourceInfo> parse_custom_resource_definition(const json& crd) {
  const json& spec = crd.value("spec", json::object());
  const json& names = spec.value("names", json::object());
  const std::string group = spec.value("group", "");
  const std::string plural = names.value("plural", "");
  if (group.empty() || plural.empty()) {
    throw std::invalid_argument("CustomResourceDefinition without spec.group or names.plural");
  }
  std::vector<ResourceInfo> result;
  for (const json& version : spec.value("versions", json::array())) {
    if (!version.value("served", false)) continue;
    std::vector<std::string> subresources;
    const json declared = version.value("subresources", json::object());
    for (const auto& [subresource, unused] : declared.items()) subresources.push_back(subresource);
    result.push_back(make_info(group, version.value("name", ""), plural, names.value("kind", ""),
                               spec.value("scope", "Namespaced") == "Namespaced",
                               string_list(names.value("shortNames", json())),
                               std::move(subresources)));
  }
  return result;
}

ResourceRegistry::ResourceRegistry() : resources_(builtin_resources()) {}

void ResourceRegistry::add(ResourceInfo info) {
  for (ResourceInfo& existing : resources_) {
    if (existing.gvr == info.gvr) {
      existing = std::move(info);
      return;
    }
  }
  resources_.push_back(std::move(info));
}

const ResourceInfo* ResourceRegistry::find_kind(std::string_view api_version,
                                                std::string_view kind) const {
  for (const ResourceInfo& info : resources_) {
    if (info.kind == kind && info.gvr.api_version() == api_version) return &info;
  }
  return nullptr;
}

const ResourceInfo* ResourceRegistry::find_for(const json& obj) const {
  if (!obj.is_object()) return nullptr;
  return find_kind(obj.value("apiVersion", ""), obj.value("kind", ""));
}

const ResourceInfo* ResourceRegistry::find_resource(std::string_view group,
                                                    std::string_view name) const {
  for (const ResourceInfo& info : resources_) {
    if (info.gvr.group == group &&
        (info.gvr.resource == name || contains(info.short_names, name))) {
      return &info;
    }
  }
  return nullptr;
}

std::string path(const ResourceInfo& info, const std::string& namespace_, const std::string& name,
                 const std::string& subresource) {
  const std::string& resource = info.gvr.resource;
  if (!info.namespaced && !namespace_.empty()) {
    throw std::invalid_argument(resource + " are cluster-scoped; no namespace allowed");
  }
  if (info.namespaced && namespace_.empty() && !name.empty()) {
    throw std::invalid_argument(resource + " are namespaced; " + name + " needs a namespace");
  }
  if (!subresource.empty() && name.empty()) {
    throw std::invalid_argument("subresource " + subresource + " needs an object name");
  }
  std::string result = info.gvr.group.empty() ? "/api/" + info.gvr.version
                                              : "/apis/" + info.gvr.group + "/" + info.gvr.version;
  if (!namespace_.empty()) result += "/namespaces/" + percent_encode(namespace_);
  result += "/" + resource;
  if (!name.empty()) result += "/" + percent_encode(name);
  if (!subresource.empty()) result += "/" + subresource;
  return result;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string result;
  result.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      result += c;
    } else {
      result += '%';
      result += kHex[byte >> 4];
      result += kHex[byte & 0x0F];
    }
  }
  return result;
}

std::string encode_query(const std::vector<std::pair<std::string, std::string>>& parameters) {
  std::string result;
  for (const auto& [key, value] : parameters) {
    result += result.empty() ? '?' : '&';
    result += percent_encode(key) + "=" + percent_encode(value);
  }
  return result;
}

std::string query_string(const ListOptions& options) {
  std::vector<std::pair<std::string, std::string>> parameters;
  const auto add = [&](const char* key, const std::string& value) {
    if (!value.empty()) parameters.emplace_back(key, value);
  };
  add("labelSelector", options.label_selector);
  add("fieldSelector", options.field_selector);
  if (options.limit) add("limit", std::to_string(*options.limit));
  add("continue", options.continue_token);
  add("resourceVersion", options.resource_version);
  add("resourceVersionMatch", options.resource_version_match);
  if (options.watch) add("watch", "true");
  if (options.allow_watch_bookmarks) add("allowWatchBookmarks", "true");
  if (options.timeout_seconds) add("timeoutSeconds", std::to_string(*options.timeout_seconds));
  return encode_query(parameters);
}

}  // namespace tessel::kube
