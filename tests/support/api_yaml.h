// YAML documents as JSON, the way kube-apiserver (apply patches) and kubectl (manifests) read
// them: plain scalars become booleans, null and numbers where they look like them, quoted
// scalars stay strings.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::testing {

// One document (JSON is accepted as is). Throws std::invalid_argument with yaml-cpp's message.
nlohmann::json parse_yaml(const std::string& text);
// Every document of a "---"-separated stream; empty documents are left out.
std::vector<nlohmann::json> parse_yaml_documents(const std::string& text);

}  // namespace tessel::testing
