// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding:
// stored with the v1 defaults and the structural validation of pkg/apis/admissionregistration,
// NOT enforced: the test server evaluates no CEL, so a policy never denies a request here. Tests
// that need a policy's effect must run against a real cluster.
#include <string>
#include <vector>

#include "tests/support/builtin_semantics_errors.h"
#include "tests/support/builtin_semantics_kinds.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
namespace v = validation;

json& object_field(json& object, const char* field) {
  if (!object.contains(field) || !object[field].is_object()) object[field] = json::object();
  return object[field];
}

void set_default(json& object, const char* field, const json& value) {
  if (!object.contains(field) || object[field].is_null()) object[field] = value;
}

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

void policy_defaults(json& policy) {
  json& spec = object_field(policy, "spec");
  set_default(spec, "failurePolicy", "Fail");
  if (spec.contains("matchConstraints") && spec["matchConstraints"].is_object()) {
    json& constraints = spec["matchConstraints"];
    set_default(constraints, "matchPolicy", "Equivalent");
    set_default(constraints, "namespaceSelector", json::object());
    set_default(constraints, "objectSelector", json::object());
    if (constraints.contains("resourceRules") && constraints["resourceRules"].is_array()) {
      for (json& rule : constraints["resourceRules"]) {
        if (rule.is_object()) set_default(rule, "scope", "*");
      }
    }
  }
}

void policy_admission_defaults(json& policy) { policy["status"] = json::object(); }

std::vector<FieldError> validate_policy(const json& policy) {
  std::vector<FieldError> out;
  const json spec = policy.value("spec", json::object());
  const std::string failure = text_of(spec, "failurePolicy");
  if (failure != "Fail" && failure != "Ignore") {
    out.push_back(v::not_supported("spec.failurePolicy", failure, {"Fail", "Ignore"}));
  }
  if (!spec.contains("matchConstraints") || !spec["matchConstraints"].is_object()) {
    out.push_back(v::required("spec.matchConstraints", ""));
  } else if (count_of(spec["matchConstraints"], "resourceRules") == 0) {
    out.push_back(v::required("spec.matchConstraints.resourceRules", ""));
  }
  if (count_of(spec, "validations") == 0 && count_of(spec, "auditAnnotations") == 0) {
    out.push_back(v::required("spec.validations",
                              "validations or auditAnnotations must contain at least one item"));
  }
  const json validations = spec.value("validations", json::array());
  for (std::size_t i = 0; i < validations.size(); ++i) {
    if (text_of(validations[i], "expression").empty()) {
      out.push_back(v::required(v::index("spec.validations", i) + ".expression"));
    }
  }
  const json conditions = spec.value("matchConditions", json::array());
  for (std::size_t i = 0; i < conditions.size(); ++i) {
    const std::string at = v::index("spec.matchConditions", i);
    const std::string name = text_of(conditions[i], "name");
    if (name.empty()) out.push_back(v::required(at + ".name"));
    for (const std::string& m : v::qualified_name(name)) {
      if (!name.empty()) out.push_back(v::invalid(at + ".name", name, m));
    }
    if (text_of(conditions[i], "expression").empty()) {
      out.push_back(v::required(at + ".expression"));
    }
  }
  return out;
}

std::vector<FieldError> validate_policy_update(const json&, const json& policy) {
  return validate_policy(policy);
}

std::vector<FieldError> validate_binding(const json& binding) {
  std::vector<FieldError> out;
  const json spec = binding.value("spec", json::object());
  if (text_of(spec, "policyName").empty()) out.push_back(v::required("spec.policyName"));
  const json actions = spec.value("validationActions", json::array());
  if (!actions.is_array() || actions.empty()) {
    out.push_back(
        v::required("spec.validationActions", "at least one validation action is required"));
    return out;
  }
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const std::string action = actions[i].is_string() ? actions[i].get<std::string>() : "";
    if (action != "Deny" && action != "Warn" && action != "Audit") {
      out.push_back(v::not_supported(v::index("spec.validationActions", i), action,
                                     {"Audit", "Deny", "Warn"}));
    }
  }
  return out;
}

std::vector<FieldError> validate_binding_update(const json&, const json& binding) {
  return validate_binding(binding);
}

}  // namespace

KindRules validating_admission_policy_rules() {
  return {v::name_is_dns1123_subdomain, policy_defaults, policy_admission_defaults, validate_policy,
          validate_policy_update};
}

KindRules validating_admission_policy_binding_rules() {
  return {v::name_is_dns1123_subdomain, no_defaults, no_defaults, validate_binding,
          validate_binding_update};
}

}  // namespace tessel::testing
