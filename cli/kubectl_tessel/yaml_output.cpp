#include "cli/kubectl_tessel/yaml_output.h"

#include <yaml-cpp/yaml.h>

#include "api/yaml_json.h"

namespace tessel::kubectl_tessel {

namespace {

// Whether the plain scalar `text` reads back as that string (api::yaml_to_json is the reader).
bool reads_as_string(const std::string& text) {
  if (text.empty()) return false;
  try {
    const nlohmann::json read = api::yaml_to_json(text, "value");
    return read.is_string() && read.get<std::string>() == text;
  } catch (const std::exception&) {
    return false;
  }
}

void emit(YAML::Emitter& out, const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, item] : value.items()) {
        out << YAML::Key << key << YAML::Value;
        emit(out, item);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      out << YAML::BeginSeq;
      for (const nlohmann::json& item : value) emit(out, item);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const std::string& text = value.get_ref<const std::string&>();
      if (reads_as_string(text)) {
        out << text;
      } else {
        out << YAML::DoubleQuoted << text;
      }
      break;
    }
    case nlohmann::json::value_t::null:
      out << YAML::Null;
      break;
    default:  // numbers and booleans as JSON writes them
      out << value.dump();
      break;
  }
}

}  // namespace

std::string to_yaml(const nlohmann::json& value) {
  YAML::Emitter out;
  emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace tessel::kubectl_tessel
