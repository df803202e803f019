#include "api/openapi_schema.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>

namespace tessel::api {

using nlohmann::json;

struct OpenApiSchema::Node {
  std::string type;  // object, array, string, integer, number, boolean; "" with int-or-string
  bool int_or_string = false;
  bool preserve_unknown = false;
  std::string format;
  std::optional<double> minimum, maximum;
  bool exclusive_minimum = false, exclusive_maximum = false;
  std::optional<size_t> min_length, max_length, min_items, max_items, max_properties;
  std::optional<std::regex> pattern;
  std::string pattern_text;
  std::vector<json> enum_values;
  std::optional<json> default_value;
  std::map<std::string, std::unique_ptr<Node>> properties;  // name order, as the server checks
  std::vector<std::string> required;
  std::unique_ptr<Node> items;
  std::unique_ptr<Node> additional;
  std::vector<std::string> list_map_keys;  // x-kubernetes-list-type: map
};

namespace {

// Keywords that only describe (ignored here, as by the server's validation).
const std::set<std::string> kDescriptive = {"description", "title", "example", "externalDocs"};

std::string value_text(const json& value) {
  if (value.is_string()) return "'" + value.get<std::string>() + "'";
  const std::string text = value.dump();
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

std::string number_text(double x) {
  if (std::floor(x) == x && std::fabs(x) < 1e15) return std::to_string(static_cast<int64_t>(x));
  std::string text = json(x).dump();
  return text;
}

}  // namespace

namespace {

std::unique_ptr<OpenApiSchema::Node> build_node(const json& schema, const std::string& at) {
  if (!schema.is_object()) throw std::invalid_argument(at + ": a schema must be an object");
  auto node = std::make_unique<OpenApiSchema::Node>();
  for (const auto& [key, value] : schema.items()) {
    const std::string here = at + "." + key;
    if (key == "type") {
      node->type = value.get<std::string>();
    } else if (key == "x-kubernetes-int-or-string") {
      node->int_or_string = value.get<bool>();
    } else if (key == "anyOf") {
      // Only the int-or-string form [{type: integer}, {type: string}] appears in crds/.
      if (!schema.value("x-kubernetes-int-or-string", false))
        throw std::invalid_argument(here + ": only the int-or-string form is understood");
    } else if (key == "x-kubernetes-preserve-unknown-fields") {
      node->preserve_unknown = value.get<bool>();
    } else if (key == "format") {
      node->format = value.get<std::string>();
    } else if (key == "minimum") {
      node->minimum = value.get<double>();
    } else if (key == "maximum") {
      node->maximum = value.get<double>();
    } else if (key == "exclusiveMinimum") {
      node->exclusive_minimum = value.get<bool>();
    } else if (key == "exclusiveMaximum") {
      node->exclusive_maximum = value.get<bool>();
    } else if (key == "minLength") {
      node->min_length = value.get<size_t>();
    } else if (key == "maxLength") {
      node->max_length = value.get<size_t>();
    } else if (key == "minItems") {
      node->min_items = value.get<size_t>();
    } else if (key == "maxItems") {
      node->max_items = value.get<size_t>();
    } else if (key == "maxProperties") {
      node->max_properties = value.get<size_t>();
    } else if (key == "pattern") {
      node->pattern_text = value.get<std::string>();
      node->pattern.emplace(node->pattern_text, std::regex::ECMAScript);
    } else if (key == "enum") {
      node->enum_values.assign(value.begin(), value.end());
    } else if (key == "default") {
      node->default_value = value;
    } else if (key == "properties") {
      for (const auto& [name, child] : value.items())
        node->properties[name] = build_node(child, here + "." + name);
    } else if (key == "required") {
      node->required = value.get<std::vector<std::string>>();
    } else if (key == "items") {
      node->items = build_node(value, here);
    } else if (key == "additionalProperties") {
      node->additional = build_node(value, here);
    } else if (key == "x-kubernetes-list-type") {
      if (value != "map" && value != "atomic")
        throw std::invalid_argument(here + ": only map and atomic lists are understood");
    } else if (key == "x-kubernetes-list-map-keys") {
      node->list_map_keys = value.get<std::vector<std::string>>();
    } else if (!kDescriptive.count(key)) {
      throw std::invalid_argument(here + ": schema keyword not understood by tessel's validator");
    }
  }
  return node;
}

void fill_defaults(const OpenApiSchema::Node& node, json& value) {
  if (value.is_object()) {
    for (const auto& [name, child] : node.properties) {
      if (!value.contains(name) && child->default_value) value[name] = *child->default_value;
      if (value.contains(name)) fill_defaults(*child, value[name]);
    }
    if (node.additional) {
      for (auto& [name, item] : value.items()) {
        if (!node.properties.count(name)) fill_defaults(*node.additional, item);
      }
    }
  } else if (value.is_array() && node.items) {
    for (json& item : value) fill_defaults(*node.items, item);
  }
}

std::string join_path(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}

bool type_matches(const OpenApiSchema::Node& node, const json& value) {
  if (node.int_or_string) return value.is_number_integer() || value.is_string();
  if (node.type == "object") return value.is_object();
  if (node.type == "array") return value.is_array();
  if (node.type == "string") return value.is_string();
  if (node.type == "integer") return value.is_number_integer();
  if (node.type == "number") return value.is_number();
  if (node.type == "boolean") return value.is_boolean();
  return true;  // no type: anything (preserve-unknown-fields)
}

std::string type_name(const OpenApiSchema::Node& node) {
  if (node.int_or_string) return "an integer or a string";
  if (node.type == "object") return "an object";
  if (node.type == "array") return "a list";
  if (node.type == "integer") return "an integer";
  if (node.type == "number") return "a number";
  if (node.type == "boolean") return "true or false";
  return "a string";
}

const std::regex& date_time() {
  static const std::regex rfc3339(
      "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[-+][0-9]{2}:[0-9]"
      "{2})");
  return rfc3339;
}

void check(const OpenApiSchema::Node& node, const json& value, const std::string& path,
           std::vector<FieldError>& errors) {
  const auto fail = [&](const std::string& message) { errors.push_back({path, message}); };
  if (value.is_null()) {
    fail("must be " + type_name(node) + ", got null");
    return;
  }
  if (!type_matches(node, value)) {
    fail("must be " + type_name(node) + ", got " + value_text(value));
    return;
  }
  if (value.is_number()) {
    const double x = value.get<double>();
    if (node.minimum && (node.exclusive_minimum ? !(x > *node.minimum) : x < *node.minimum)) {
      fail("must be " + std::string(node.exclusive_minimum ? "> " : ">= ") +
           number_text(*node.minimum) + ", got " + value_text(value));
    } else if (node.maximum &&
               (node.exclusive_maximum ? !(x < *node.maximum) : x > *node.maximum)) {
      fail("must be " + std::string(node.exclusive_maximum ? "< " : "<= ") +
           number_text(*node.maximum) + ", got " + value_text(value));
    } else if (node.format == "int32" && (x < std::numeric_limits<int32_t>::min() ||
                                          x > std::numeric_limits<int32_t>::max())) {
      fail("must fit in 32 bits, got " + value_text(value));
    }
  }
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (node.min_length && text.size() < *node.min_length) {
      fail(*node.min_length == 1
               ? "must not be empty"
               : "must be at least " + std::to_string(*node.min_length) + " characters long");
    } else if (node.max_length && text.size() > *node.max_length) {
      fail("must be at most " + std::to_string(*node.max_length) + " characters long, got " +
           std::to_string(text.size()));
    } else if (node.pattern && !std::regex_search(text, *node.pattern)) {
      fail("'" + text + "' does not match " + node.pattern_text);
    } else if (node.format == "date-time" && !std::regex_match(text, date_time())) {
      fail("'" + text + "' is not an RFC 3339 date-time");
    }
  }
  if (!node.enum_values.empty()) {
    bool known = false;
    for (const json& allowed : node.enum_values) known = known || allowed == value;
    if (!known) {
      std::string list;
      for (const json& allowed : node.enum_values)
        list += (list.empty() ? "" : ", ") +
                (allowed.is_string() ? allowed.get<std::string>() : allowed.dump());
      fail(value_text(value) + " is not one of: " + list);
    }
  }
  if (value.is_array()) {
    if (node.max_items && value.size() > *node.max_items) {
      fail("must have at most " + std::to_string(*node.max_items) + " items, got " +
           std::to_string(value.size()));
      return;
    }
    if (node.min_items && value.size() < *node.min_items) {
      fail("must have at least " + std::to_string(*node.min_items) + " items");
    }
    std::set<std::string> keys_seen;
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string item_path = path + "[" + std::to_string(i) + "]";
      if (node.items) check(*node.items, value[i], item_path, errors);
      if (!node.list_map_keys.empty() && value[i].is_object()) {
        std::string key;
        for (const std::string& k : node.list_map_keys)
          key += value[i].value(k, json()).dump() + ",";
        if (!keys_seen.insert(key).second)
          errors.push_back({item_path, "duplicate entry for key " + key.substr(0, key.size() - 1)});
      }
    }
  }
  if (value.is_object()) {
    if (node.max_properties && value.size() > *node.max_properties) {
      fail("must have at most " + std::to_string(*node.max_properties) + " entries, got " +
           std::to_string(value.size()));
      return;
    }
    for (const auto& [name, item] : value.items()) {
      const std::string item_path = join_path(path, name);
      const auto known = node.properties.find(name);
      if (known != node.properties.end()) {
        check(*known->second, item, item_path, errors);
      } else if (node.additional) {
        check(*node.additional, item, item_path, errors);
      } else if (!node.preserve_unknown) {
        errors.push_back({item_path, "unknown field"});
      }
    }
    for (const std::string& name : node.required) {
      if (!value.contains(name)) errors.push_back({join_path(path, name), "required"});
    }
  }
}

}  // namespace

OpenApiSchema::OpenApiSchema(const json& open_api_v3_schema)
    : root_(build_node(open_api_v3_schema, "openAPIV3Schema")), source_(open_api_v3_schema) {}
OpenApiSchema::~OpenApiSchema() = default;
OpenApiSchema::OpenApiSchema(OpenApiSchema&&) noexcept = default;

void OpenApiSchema::apply_defaults(json& object) const { fill_defaults(*root_, object); }

std::vector<FieldError> OpenApiSchema::validate(const json& object) const {
  std::vector<FieldError> errors;
  if (!object.is_object()) return {{"", "must be an object"}};
  // apiVersion, kind and metadata are the server's (ObjectMeta rules), checked by the caller.
  json body = object;
  for (const char* own : {"apiVersion", "kind", "metadata"}) body.erase(own);
  check(*root_, body, "", errors);
  return errors;
}

const json& OpenApiSchema::at(const std::string& dotted_path) const {
  const json* node = &source_;
  size_t begin = 0;
  while (begin <= dotted_path.size()) {
    const size_t end = std::min(dotted_path.find('.', begin), dotted_path.size());
    node = &node->at("properties").at(dotted_path.substr(begin, end - begin));
    begin = end + 1;
  }
  return *node;
}

}  // namespace tessel::api
