#include "tests/support/api_yaml.h"

#include <yaml-cpp/yaml.h>

#include <stdexcept>

namespace tessel::testing {
namespace {

using nlohmann::json;

json to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json object = json::object();
      for (const auto& entry : node) object[entry.first.as<std::string>()] = to_json(entry.second);
      return object;
    }
    case YAML::NodeType::Sequence: {
      json array = json::array();
      for (const auto& entry : node) array.push_back(to_json(entry));
      return array;
    }
    case YAML::NodeType::Scalar: {
      const std::string& text = node.Scalar();
      if (node.Tag() == "!") return text;  // quoted
      if (text == "true" || text == "True" || text == "TRUE") return true;
      if (text == "false" || text == "False" || text == "FALSE") return false;
      if (text == "null" || text == "Null" || text == "NULL" || text == "~") return nullptr;
      const json number = json::parse(text, nullptr, false);
      if (number.is_number()) return number;
      return text;
    }
    default:
      return nullptr;
  }
}

}  // namespace

json parse_yaml(const std::string& text) {
  const json as_json = json::parse(text, nullptr, false);
  if (!as_json.is_discarded()) return as_json;
  try {
    return to_json(YAML::Load(text));
  } catch (const YAML::Exception& error) {
    throw std::invalid_argument(error.what());
  }
}

std::vector<json> parse_yaml_documents(const std::string& text) {
  std::vector<json> documents;
  try {
    for (const YAML::Node& node : YAML::LoadAll(text)) {
      json document = to_json(node);
      if (!document.is_null()) documents.push_back(std::move(document));
    }
  } catch (const YAML::Exception& error) {
    throw std::invalid_argument(error.what());
  }
  return documents;
}

}  // namespace tessel::testing
