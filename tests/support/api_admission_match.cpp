#include "tests/support/api_admission_match.h"

#include <algorithm>

namespace tessel::testing {
namespace {

using json = nlohmann::json;

bool list_matches(const json& list, const std::string& value) {
  if (!list.is_array()) return false;
  return std::any_of(list.begin(), list.end(),
                     [&](const json& entry) { return entry == "*" || entry == value; });
}

bool scope_matches(const json& rule, const AdmissionTarget& target) {
  const std::string scope = rule.value("scope", "*");
  // Namespaces are cluster-scoped, though a request for one carries its name as namespace.
  const bool is_namespace = target.group.empty() && target.resource == "namespaces";
  if (scope == "Namespaced") return !is_namespace && !target.namespace_.empty();
  if (scope == "Cluster") return is_namespace || target.namespace_.empty();
  return true;
}

bool resource_matches(const json& resources, const AdmissionTarget& target) {
  if (!resources.is_array()) return false;
  for (const json& entry : resources) {
    if (!entry.is_string()) continue;
    const std::string text = entry.get<std::string>();
    const std::size_t slash = text.find('/');
    const std::string resource = text.substr(0, slash);
    const std::string sub = slash == std::string::npos ? "" : text.substr(slash + 1);
    if ((resource == "*" || resource == target.resource) &&
        (sub == "*" || sub == target.subresource)) {
      return true;
    }
  }
  return false;
}

std::string label(const json& labels, const std::string& key, bool* found) {
  *found = labels.is_object() && labels.contains(key) && labels[key].is_string();
  return *found ? labels[key].get<std::string>() : "";
}

}  // namespace

bool rules_match(const json& webhook, const AdmissionTarget& target) {
  const json rules = webhook.value("rules", json::array());
  if (!rules.is_array()) return false;
  return std::any_of(rules.begin(), rules.end(), [&](const json& rule) {
    return rule.is_object() && scope_matches(rule, target) &&
           list_matches(rule.value("operations", json()), target.operation) &&
           list_matches(rule.value("apiGroups", json()), target.group) &&
           list_matches(rule.value("apiVersions", json()), target.version) &&
           resource_matches(rule.value("resources", json()), target);
  });
}

bool selects_everything(const json& selector) {
  if (!selector.is_object()) return true;
  const json labels = selector.value("matchLabels", json::object());
  const json expressions = selector.value("matchExpressions", json::array());
  return (!labels.is_object() || labels.empty()) &&
         (!expressions.is_array() || expressions.empty());
}

bool label_selector_matches(const json& selector, const json& labels) {
  if (selects_everything(selector)) return true;
  const json match_labels = selector.value("matchLabels", json::object());
  if (match_labels.is_object()) {
    for (const auto& [key, value] : match_labels.items()) {
      bool found = false;
      if (label(labels, key, &found) != value || !found) return false;
    }
  }
  const json expressions = selector.value("matchExpressions", json::array());
  if (!expressions.is_array()) return true;
  for (const json& expression : expressions) {
    bool found = false;
    const std::string value = label(labels, expression.value("key", ""), &found);
    const std::string op = expression.value("operator", "");
    const json values = expression.value("values", json::array());
    const bool listed = std::find(values.begin(), values.end(), json(value)) != values.end();
    if (op == "In" && !(found && listed)) return false;
    if (op == "NotIn" && found && listed) return false;
    if (op == "Exists" && !found) return false;
    if (op == "DoesNotExist" && found) return false;
  }
  return true;
}

}  // namespace tessel::testing
