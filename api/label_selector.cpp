#include "api/label_selector.h"

#include <algorithm>

namespace tessel::api {

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& [key, value] : match_labels) {
    const auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  for (const LabelRequirement& r : match_expressions) {
    const auto it = labels.find(r.key);
    const bool present = it != labels.end();
    const bool listed =
        present && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    if (r.op == "In" && !listed) return false;
    if (r.op == "NotIn" && listed) return false;
    if (r.op == "Exists" && !present) return false;
    if (r.op == "DoesNotExist" && present) return false;
  }
  return true;
}

LabelSelector LabelSelector::from_json(const nlohmann::json& selector) {
  LabelSelector s;
  if (selector.contains("matchLabels"))
    s.match_labels = selector["matchLabels"].get<std::map<std::string, std::string>>();
  for (const auto& e : selector.value("matchExpressions", nlohmann::json::array())) {
    s.match_expressions.push_back({e.at("key").get<std::string>(),
                                   e.at("operator").get<std::string>(),
                                   e.value("values", std::vector<std::string>{})});
  }
  return s;
}

}  // namespace tessel::api
