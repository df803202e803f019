// One YAML document as JSON, with YAML 1.2's core schema deciding what a plain scalar is:
// integers and finite decimals become numbers, true/false booleans, null/~/empty null, and
// everything quoted or else a string. `.inf` and `.nan` are refused (JSON has no such number).
// Errors are ManifestErrors naming the source, line and column.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel::api {

nlohmann::json yaml_to_json(const std::string& text, const std::string& source);

}  // namespace tessel::api
