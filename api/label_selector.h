// A metav1.LabelSelector (matchLabels and matchExpressions), as TrainingJob's clusterSelector
// and gpuSelector carry it. An empty selector matches everything, as in Kubernetes.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::api {

struct LabelRequirement {
  std::string key;
  std::string op;  // In, NotIn, Exists, DoesNotExist
  std::vector<std::string> values;
};

struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelRequirement> match_expressions;

  bool matches(const std::map<std::string, std::string>& labels) const;
  // Reads a schema-valid selector object (api/crds.h has checked its shape).
  static LabelSelector from_json(const nlohmann::json& selector);
};

}  // namespace tessel::api
