// The plugin's -o yaml: a JSON value as a YAML document, strings quoted where YAML would read
// them as something else ("1", "true", "", "null").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel::kubectl_tessel {

std::string to_yaml(const nlohmann::json& value);

}  // namespace tessel::kubectl_tessel
