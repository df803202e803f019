#include "tests/support/api_access_review.h"

#include "tests/support/api_errors.h"
#include "tests/support/builtin_semantics_errors.h"

namespace tessel::testing {

using json = nlohmann::json;

json answer_self_subject_access_review(const json& body, const UserInfo& user,
                                       const Authorizer& authorizer) {
  if (!body.is_object() || body.value("kind", "") != "SelfSubjectAccessReview" ||
      body.value("apiVersion", "") != "authorization.k8s.io/v1") {
    throw bad_request("the body must be an authorization.k8s.io/v1 SelfSubjectAccessReview");
  }
  const json spec = body.value("spec", json::object());
  const json resource = spec.value("resourceAttributes", json());
  const json non_resource = spec.value("nonResourceAttributes", json());
  if (resource.is_object() == non_resource.is_object()) {
    throw invalid(
        "SelfSubjectAccessReview", "authorization.k8s.io", "",
        {resource.is_object()
             ? validation::invalid("spec.nonResourceAttributes", non_resource,
                                   "cannot be specified in combination with resourceAttributes")
             : validation::invalid("spec.resourceAttributes", nullptr,
                                   "exactly one of nonResourceAttributes or resourceAttributes "
                                   "must be specified")});
  }
  RequestAttributes attributes;
  attributes.user = user;
  if (resource.is_object()) {
    attributes.verb = resource.value("verb", "");
    attributes.api_group = resource.value("group", "");
    attributes.resource = resource.value("resource", "");
    attributes.subresource = resource.value("subresource", "");
    attributes.namespace_ = resource.value("namespace", "");
    attributes.name = resource.value("name", "");
  } else {
    attributes.resource_request = false;
    attributes.verb = non_resource.value("verb", "");
    attributes.path = non_resource.value("path", "");
  }
  json answer = body;
  answer["metadata"] = {{"creationTimestamp", nullptr}};
  answer["status"] = {{"allowed", authorizer(attributes)}};
  return answer;
}

std::optional<std::vector<json>> allow_everything_rules(const UserInfo&, const std::string&) {
  return std::vector<json>{{{"verbs", {"*"}}, {"apiGroups", {"*"}}, {"resources", {"*"}}},
                           {{"verbs", {"*"}}, {"nonResourceURLs", {"*"}}}};
}

json answer_self_subject_rules_review(const json& body, const UserInfo& user,
                                      const RuleResolver& resolver) {
  if (!body.is_object() || body.value("kind", "") != "SelfSubjectRulesReview" ||
      body.value("apiVersion", "") != "authorization.k8s.io/v1") {
    throw bad_request("the body must be an authorization.k8s.io/v1 SelfSubjectRulesReview");
  }
  const std::string namespace_ = body.value("spec", json::object()).value("namespace", "");
  if (namespace_.empty()) {
    throw invalid("SelfSubjectRulesReview", "authorization.k8s.io", "",
                  {validation::required("spec.namespace")});
  }
  const std::optional<std::vector<json>> rules =
      resolver ? resolver(user, namespace_) : std::nullopt;
  json resource_rules = json::array();
  json non_resource_rules = json::array();
  for (const json& rule : rules.value_or(std::vector<json>{})) {
    if (rule.contains("nonResourceURLs") && rule["nonResourceURLs"].is_array() &&
        !rule["nonResourceURLs"].empty()) {
      non_resource_rules.push_back({{"verbs", rule.value("verbs", json::array())},
                                    {"nonResourceURLs", rule["nonResourceURLs"]}});
      continue;
    }
    json kept = {{"verbs", rule.value("verbs", json::array())}};
    for (const char* field : {"apiGroups", "resources", "resourceNames"}) {
      if (rule.contains(field) && rule[field].is_array() && !rule[field].empty()) {
        kept[field] = rule[field];
      }
    }
    resource_rules.push_back(std::move(kept));
  }
  json answer = body;
  answer["metadata"] = {{"creationTimestamp", nullptr}};
  answer["status"] = {{"resourceRules", resource_rules},
                      {"nonResourceRules", non_resource_rules},
                      {"incomplete", !rules.has_value()}};
  return answer;
}

}  // namespace tessel::testing
