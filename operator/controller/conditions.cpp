#include "operator/controller/conditions.h"

#include <regex>
#include <stdexcept>

namespace tessel::controller {

using nlohmann::json;

const json* find_condition(const json& conditions, const std::string& type) {
  if (!conditions.is_array()) return nullptr;
  for (const json& c : conditions) {
    if (c.value("type", "") == type) return &c;
  }
  return nullptr;
}

bool condition_is_true(const json& conditions, const std::string& type) {
  const json* c = find_condition(conditions, type);
  return c && c->value("status", "") == "True";
}

bool set_condition(json& conditions, const Condition& condition, int64_t generation,
                   const std::string& now) {
  static const std::regex reason("[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?");
  if (condition.status != "True" && condition.status != "False" && condition.status != "Unknown")
    throw std::invalid_argument("condition " + condition.type + ": status '" + condition.status +
                                "' is not True, False or Unknown");
  if (!std::regex_match(condition.reason, reason))
    throw std::invalid_argument("condition " + condition.type + ": reason '" + condition.reason +
                                "' is not CamelCase");
  if (!conditions.is_array()) conditions = json::array();
  json wanted = {{"type", condition.type},           {"status", condition.status},
                 {"observedGeneration", generation}, {"lastTransitionTime", now},
                 {"reason", condition.reason},       {"message", condition.message}};
  for (json& c : conditions) {
    if (c.value("type", "") != condition.type) continue;
    if (c.value("status", "") == condition.status) {
      wanted["lastTransitionTime"] = c.value("lastTransitionTime", now);
    }
    if (c == wanted) return false;
    c = std::move(wanted);
    return true;
  }
  conditions.push_back(std::move(wanted));
  return true;
}

}  // namespace tessel::controller
