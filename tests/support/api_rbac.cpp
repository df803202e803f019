#include "tests/support/api_rbac.h"

#include <algorithm>

namespace tessel::testing {
namespace {

using json = nlohmann::json;

constexpr const char* kPrivilegedGroup = "system:masters";
constexpr const char* kServiceAccountPrefix = "system:serviceaccount:";

bool has(const json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_array();
}

bool any_of_strings(const json& rule, const char* field, auto&& matches) {
  if (!has(rule, field)) return false;
  return std::any_of(rule[field].begin(), rule[field].end(), [&](const json& entry) {
    return entry.is_string() && matches(entry.get<std::string>());
  });
}

bool verb_matches(const json& rule, const std::string& verb) {
  return any_of_strings(rule, "verbs", [&](const std::string& v) { return v == "*" || v == verb; });
}

bool api_group_matches(const json& rule, const std::string& group) {
  return any_of_strings(rule, "apiGroups",
                        [&](const std::string& g) { return g == "*" || g == group; });
}

// "*" matches everything, "res/sub" exactly, "*/sub" any resource's subresource sub.
bool resource_matches(const json& rule, const std::string& combined,
                      const std::string& subresource) {
  return any_of_strings(rule, "resources", [&](const std::string& r) {
    if (r == "*" || r == combined) return true;
    return !subresource.empty() && r == "*/" + subresource;
  });
}

bool resource_name_matches(const json& rule, const std::string& name) {
  if (!has(rule, "resourceNames") || rule["resourceNames"].empty()) return true;
  return any_of_strings(rule, "resourceNames", [&](const std::string& n) { return n == name; });
}

bool non_resource_url_matches(const json& rule, const std::string& path) {
  return any_of_strings(rule, "nonResourceURLs", [&](const std::string& url) {
    if (url == "*" || url == path) return true;
    return url.ends_with("*") && path.starts_with(url.substr(0, url.size() - 1));
  });
}

std::string string_at(const json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_string()
             ? object[field].get<std::string>()
             : "";
}

json bootstrap_metadata(const std::string& name) {
  return {{"name", name},
          {"labels", {{"kubernetes.io/bootstrapping", "rbac-defaults"}}},
          {"annotations", {{"rbac.authorization.kubernetes.io/autoupdate", "true"}}}};
}

json cluster_role(const std::string& name, json rules) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "ClusterRole"},
          {"metadata", bootstrap_metadata(name)},
          {"rules", std::move(rules)}};
}

json cluster_role_binding(const std::string& name, const std::vector<std::string>& groups) {
  json subjects = json::array();
  for (const std::string& group : groups) {
    subjects.push_back({{"apiGroup", kRbacGroup}, {"kind", "Group"}, {"name", group}});
  }
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "ClusterRoleBinding"},
          {"metadata", bootstrap_metadata(name)},
          {"roleRef", {{"apiGroup", kRbacGroup}, {"kind", "ClusterRole"}, {"name", name}}},
          {"subjects", subjects}};
}

}  // namespace

bool rule_allows(const json& rule, const RequestAttributes& attributes) {
  if (!verb_matches(rule, attributes.verb)) return false;
  if (!attributes.resource_request) return non_resource_url_matches(rule, attributes.path);
  const std::string combined = attributes.subresource.empty()
                                   ? attributes.resource
                                   : attributes.resource + "/" + attributes.subresource;
  return api_group_matches(rule, attributes.api_group) &&
         resource_matches(rule, combined, attributes.subresource) &&
         resource_name_matches(rule, attributes.name);
}

bool subject_applies(const json& subject, const UserInfo& user,
                     const std::string& binding_namespace) {
  const std::string kind = string_at(subject, "kind");
  const std::string name = string_at(subject, "name");
  if (kind == "User") return user.name == name;
  if (kind == "Group") {
    return std::find(user.groups.begin(), user.groups.end(), name) != user.groups.end();
  }
  if (kind == "ServiceAccount") {
    std::string account_namespace = string_at(subject, "namespace");
    if (account_namespace.empty()) account_namespace = binding_namespace;
    if (account_namespace.empty()) return false;
    return user.name == kServiceAccountPrefix + account_namespace + ":" + name;
  }
  return false;
}

bool RbacAuthorizer::operator()(const RequestAttributes& attributes) const {
  const std::vector<std::string>& groups = attributes.user.groups;
  if (std::find(groups.begin(), groups.end(), kPrivilegedGroup) != groups.end()) return true;
  const auto applies = [&](const json& binding, const std::string& binding_namespace) {
    if (!has(binding, "subjects")) return false;
    return std::any_of(binding["subjects"].begin(), binding["subjects"].end(),
                       [&](const json& subject) {
                         return subject_applies(subject, attributes.user, binding_namespace);
                       });
  };
  for (const auto& [key, binding] : store_.list({kRbacGroup, "clusterrolebindings"}, "").items) {
    if (applies(*binding, "") && role_allows(binding->value("roleRef", json()), "", attributes)) {
      return true;
    }
  }
  if (attributes.namespace_.empty()) return false;
  for (const auto& [key, binding] :
       store_.list({kRbacGroup, "rolebindings"}, attributes.namespace_).items) {
    if (applies(*binding, attributes.namespace_) &&
        role_allows(binding->value("roleRef", json()), attributes.namespace_, attributes)) {
      return true;
    }
  }
  return false;
}

json RbacAuthorizer::role_rules(const json& role_ref, const std::string& binding_namespace) const {
  const std::string kind = string_at(role_ref, "kind");
  const std::string name = string_at(role_ref, "name");
  std::optional<json> role;
  if (kind == "ClusterRole") {
    role = store_.get({kRbacGroup, "clusterroles"}, "", name);
  } else if (kind == "Role" && !binding_namespace.empty()) {
    role = store_.get({kRbacGroup, "roles"}, binding_namespace, name);
  }
  if (!role || !has(*role, "rules")) return json::array();
  return (*role)["rules"];
}

bool RbacAuthorizer::role_allows(const json& role_ref, const std::string& binding_namespace,
                                 const RequestAttributes& attributes) const {
  const json rules = role_rules(role_ref, binding_namespace);
  return std::any_of(rules.begin(), rules.end(),
                     [&](const json& rule) { return rule_allows(rule, attributes); });
}

std::vector<json> RbacAuthorizer::rules_for(const UserInfo& user,
                                            const std::string& namespace_) const {
  std::vector<json> rules;
  const auto collect = [&](const json& binding, const std::string& binding_namespace) {
    if (!has(binding, "subjects")) return;
    const bool applies = std::any_of(
        binding["subjects"].begin(), binding["subjects"].end(),
        [&](const json& subject) { return subject_applies(subject, user, binding_namespace); });
    if (!applies) return;
    for (const json& rule : role_rules(binding.value("roleRef", json()), binding_namespace)) {
      rules.push_back(rule);
    }
  };
  for (const auto& [key, binding] : store_.list({kRbacGroup, "clusterrolebindings"}, "").items) {
    collect(*binding, "");
  }
  if (!namespace_.empty()) {
    for (const auto& [key, binding] : store_.list({kRbacGroup, "rolebindings"}, namespace_).items) {
      collect(*binding, namespace_);
    }
  }
  return rules;
}

std::vector<json> rbac_bootstrap_policy() {
  const json discovery_urls = {"/api",     "/api/*",   "/apis",    "/apis/*",
                               "/healthz", "/livez",   "/openapi", "/openapi/*",
                               "/readyz",  "/version", "/version/"};
  const json public_info_urls = {"/healthz", "/livez", "/readyz", "/version", "/version/"};
  return {
      cluster_role("cluster-admin",
                   json::array({{{"apiGroups", {"*"}}, {"resources", {"*"}}, {"verbs", {"*"}}},
                                {{"nonResourceURLs", {"*"}}, {"verbs", {"*"}}}})),
      cluster_role("system:discovery",
                   json::array({{{"nonResourceURLs", discovery_urls}, {"verbs", {"get"}}}})),
      cluster_role(
          "system:basic-user",
          json::array({{{"apiGroups", {"authorization.k8s.io"}},
                        {"resources", {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
                        {"verbs", {"create"}}}})),
      cluster_role("system:public-info-viewer",
                   json::array({{{"nonResourceURLs", public_info_urls}, {"verbs", {"get"}}}})),
      cluster_role_binding("cluster-admin", {"system:masters"}),
      cluster_role_binding("system:discovery", {"system:authenticated"}),
      cluster_role_binding("system:basic-user", {"system:authenticated"}),
      cluster_role_binding("system:public-info-viewer",
                           {"system:authenticated", "system:unauthenticated"}),
  };
}

}  // namespace tessel::testing
