// rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding and ClusterRoleBinding: the
// defaults and validation of pkg/apis/rbac (v1 defaults, validation), worded as kube-apiserver
// words them. ClusterRole aggregation is stored, not run (no aggregation controller).
#include <string>
#include <vector>

#include "tests/support/builtin_semantics_errors.h"
#include "tests/support/builtin_semantics_kinds.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
namespace v = validation;

constexpr const char* kRbacApiGroup = "rbac.authorization.k8s.io";

std::string text_of(const json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_string()
             ? object[field].get<std::string>()
             : "";
}

std::size_t count_of(const json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_array()
             ? object[field].size()
             : 0;
}

const json& array_at(const json& object, const char* field) {
  static const json kEmpty = json::array();
  return object.is_object() && object.contains(field) && object[field].is_array() ? object[field]
                                                                                  : kEmpty;
}

// ValidatePolicyRule.
std::vector<FieldError> validate_rule(const json& rule, bool namespaced, const std::string& path) {
  std::vector<FieldError> out;
  if (count_of(rule, "verbs") == 0) {
    out.push_back(v::required(path + ".verbs", "verbs must contain at least one value"));
  }
  if (count_of(rule, "nonResourceURLs") > 0) {
    const json urls = rule["nonResourceURLs"];
    if (namespaced) {
      out.push_back(v::invalid(path + ".nonResourceURLs", urls,
                               "namespaced rules cannot apply to non-resource URLs"));
    }
    if (count_of(rule, "apiGroups") > 0 || count_of(rule, "resources") > 0 ||
        count_of(rule, "resourceNames") > 0) {
      out.push_back(v::invalid(path + ".nonResourceURLs", urls,
                               "rules cannot apply to both regular resources and non-resource "
                               "URLs"));
    }
    return out;
  }
  if (count_of(rule, "apiGroups") == 0) {
    out.push_back(
        v::required(path + ".apiGroups", "resource rules must supply at least one api group"));
  }
  if (count_of(rule, "resources") == 0) {
    out.push_back(
        v::required(path + ".resources", "resource rules must supply at least one resource"));
  }
  return out;
}

std::vector<FieldError> validate_rules(const json& role, bool namespaced) {
  std::vector<FieldError> out;
  const json& rules = array_at(role, "rules");
  for (std::size_t i = 0; i < rules.size(); ++i) {
    v::append(out, validate_rule(rules[i], namespaced, v::index("rules", i)));
  }
  return out;
}

std::vector<FieldError> validate_role(const json& role) { return validate_rules(role, true); }

std::vector<FieldError> validate_cluster_role(const json& role) {
  std::vector<FieldError> out = validate_rules(role, false);
  if (role.contains("aggregationRule") && role["aggregationRule"].is_object() &&
      count_of(role["aggregationRule"], "clusterRoleSelectors") == 0) {
    out.push_back(v::required("aggregationRule.clusterRoleSelectors",
                              "at least one clusterRoleSelector required if aggregationRule is "
                              "non-nil"));
  }
  return out;
}

std::vector<FieldError> validate_role_update(const json&, const json& role) {
  return validate_role(role);
}

std::vector<FieldError> validate_cluster_role_update(const json&, const json& role) {
  return validate_cluster_role(role);
}

// SetDefaults_RoleBinding / _ClusterRoleBinding and SetDefaults_Subject.
void binding_defaults(json& binding) {
  if (!binding.contains("roleRef") || !binding["roleRef"].is_object()) {
    binding["roleRef"] = json::object();
  }
  if (text_of(binding["roleRef"], "apiGroup").empty()) {
    binding["roleRef"]["apiGroup"] = kRbacApiGroup;
  }
  if (!binding.contains("subjects") || !binding["subjects"].is_array()) return;
  for (json& subject : binding["subjects"]) {
    if (!subject.is_object() || !text_of(subject, "apiGroup").empty()) continue;
    const std::string kind = text_of(subject, "kind");
    if (kind == "ServiceAccount") {
      subject["apiGroup"] = "";
    } else if (kind == "User" || kind == "Group") {
      subject["apiGroup"] = kRbacApiGroup;
    }
  }
}

// ValidateRoleBindingSubject.
std::vector<FieldError> validate_subject(const json& subject, bool namespaced,
                                         const std::string& path) {
  std::vector<FieldError> out;
  const std::string name = text_of(subject, "name");
  const std::string kind = text_of(subject, "kind");
  const std::string api_group = text_of(subject, "apiGroup");
  if (name.empty()) out.push_back(v::required(path + ".name"));
  if (kind == "ServiceAccount") {
    if (!name.empty()) {
      for (const std::string& m : v::dns1123_subdomain(name)) {
        out.push_back(v::invalid(path + ".name", name, m));
      }
    }
    if (!api_group.empty()) out.push_back(v::not_supported(path + ".apiGroup", api_group, {""}));
    if (!namespaced && text_of(subject, "namespace").empty()) {
      out.push_back(v::required(path + ".namespace"));
    }
  } else if (kind == "User" || kind == "Group") {
    if (api_group != kRbacApiGroup) {
      out.push_back(v::not_supported(path + ".apiGroup", api_group, {kRbacApiGroup}));
    }
  } else {
    out.push_back(v::not_supported(path + ".kind", kind, {"ServiceAccount", "User", "Group"}));
  }
  return out;
}

std::vector<FieldError> validate_binding(const json& binding, bool namespaced) {
  std::vector<FieldError> out;
  const json role_ref = binding.value("roleRef", json::object());
  const std::string api_group = text_of(role_ref, "apiGroup");
  if (api_group != kRbacApiGroup) {
    out.push_back(v::not_supported("roleRef.apiGroup", api_group, {kRbacApiGroup}));
  }
  const std::string kind = text_of(role_ref, "kind");
  if (namespaced ? kind != "Role" && kind != "ClusterRole" : kind != "ClusterRole") {
    out.push_back(v::not_supported("roleRef.kind", kind,
                                   namespaced ? std::vector<std::string>{"Role", "ClusterRole"}
                                              : std::vector<std::string>{"ClusterRole"}));
  }
  const std::string name = text_of(role_ref, "name");
  if (name.empty()) {
    out.push_back(v::required("roleRef.name"));
  } else {
    for (const std::string& m : v::path_segment_name(name, false)) {
      out.push_back(v::invalid("roleRef.name", name, m));
    }
  }
  const json& subjects = array_at(binding, "subjects");
  for (std::size_t i = 0; i < subjects.size(); ++i) {
    v::append(out, validate_subject(subjects[i], namespaced, v::index("subjects", i)));
  }
  return out;
}

// roleRef is immutable; the error prints it as Go's %#v of rbac.RoleRef.
std::vector<FieldError> validate_role_ref_unchanged(const json& old_binding, const json& binding) {
  const json old_ref = old_binding.value("roleRef", json::object());
  const json ref = binding.value("roleRef", json::object());
  const auto same = [&](const char* field) {
    return text_of(old_ref, field) == text_of(ref, field);
  };
  if (same("apiGroup") && same("kind") && same("name")) return {};
  const std::string shown = "rbac.RoleRef{APIGroup:" + json(text_of(ref, "apiGroup")).dump() +
                            ", Kind:" + json(text_of(ref, "kind")).dump() +
                            ", Name:" + json(text_of(ref, "name")).dump() + "}";
  return {{"FieldValueInvalid", "roleRef", "Invalid value: " + shown + ": cannot change roleRef"}};
}

std::vector<FieldError> validate_role_binding(const json& binding) {
  return validate_binding(binding, true);
}

std::vector<FieldError> validate_cluster_role_binding(const json& binding) {
  return validate_binding(binding, false);
}

std::vector<FieldError> validate_role_binding_update(const json& old_binding, const json& binding) {
  std::vector<FieldError> out = validate_role_binding(binding);
  v::append(out, validate_role_ref_unchanged(old_binding, binding));
  return out;
}

std::vector<FieldError> validate_cluster_role_binding_update(const json& old_binding,
                                                             const json& binding) {
  std::vector<FieldError> out = validate_cluster_role_binding(binding);
  v::append(out, validate_role_ref_unchanged(old_binding, binding));
  return out;
}

}  // namespace

KindRules role_rules() {
  return {v::path_segment_name, no_defaults, no_defaults, validate_role, validate_role_update};
}

KindRules cluster_role_rules() {
  return {v::path_segment_name, no_defaults, no_defaults, validate_cluster_role,
          validate_cluster_role_update};
}

KindRules role_binding_rules() {
  return {v::path_segment_name, binding_defaults, no_defaults, validate_role_binding,
          validate_role_binding_update};
}

KindRules cluster_role_binding_rules() {
  return {v::path_segment_name, binding_defaults, no_defaults, validate_cluster_role_binding,
          validate_cluster_role_binding_update};
}

}  // namespace tessel::testing
