#include "api/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <regex>

#include "api/manifest_error.h"

namespace tessel::api {
namespace {

using nlohmann::json;

// Deeper nesting than any manifest has; a bound so that hostile input cannot exhaust the stack.
constexpr int kMaxDepth = 64;
// Values in one document, aliases counted each time they are used: a bound on what nested
// aliases ("billion laughs") can expand to. A TrainingJob has a few hundred.
constexpr long kMaxValues = 100000;

std::string where(const YAML::Mark& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

[[noreturn]] void fail(const std::string& source, const YAML::Mark& mark, const std::string& why) {
  throw ManifestError(source, {{"", where(mark) + ": " + why}});
}

json scalar(const YAML::Node& node, const std::string& source) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted
  static const std::regex integer("[-+]?[0-9]+");
  static const std::regex decimal("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  static const std::regex infinite("[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
    return nullptr;
  if (std::regex_match(text, integer)) {
    int64_t value = 0;
    const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
    const auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size()) return value;
    // Beyond int64: a (rounded) number, as kube-apiserver's JSON decoding makes of it.
  }
  if (std::regex_match(text, decimal)) {
    const double value = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(value)) fail(source, node.Mark(), "'" + text + "' is beyond any number");
    return value;
  }
  if (std::regex_match(text, infinite)) {
    fail(source, node.Mark(), "'" + text + "' is not a finite number");
  }
  return text;
}

json convert(const YAML::Node& node, const std::string& source, int depth, long& values) {
  if (depth > kMaxDepth)
    fail(source, node.Mark(), "nested deeper than " + std::to_string(kMaxDepth));
  if (++values > kMaxValues) {
    fail(source, node.Mark(),
         "more than " + std::to_string(kMaxValues) + " values (aliases expanded)");
  }
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar(node, source);
    case YAML::NodeType::Sequence: {
      json array = json::array();
      for (const YAML::Node& item : node) array.push_back(convert(item, source, depth + 1, values));
      return array;
    }
    case YAML::NodeType::Map: {
      json object = json::object();
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) fail(source, entry.first.Mark(), "a key must be a string");
        const std::string key = entry.first.Scalar();
        if (object.contains(key)) fail(source, entry.first.Mark(), "duplicate key '" + key + "'");
        object[key] = convert(entry.second, source, depth + 1, values);
      }
      return object;
    }
  }
  return nullptr;
}

}  // namespace

json yaml_to_json(const std::string& text, const std::string& source) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    fail(source, e.mark, e.msg);
  }
  if (documents.size() != 1) {
    throw ManifestError(
        source, {{"", "expected one YAML document, found " + std::to_string(documents.size())}});
  }
  long values = 0;
  return convert(documents[0], source, 0, values);
}

}  // namespace tessel::api
