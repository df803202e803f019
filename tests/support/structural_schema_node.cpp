#include "tests/support/structural_schema_node.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace tessel::testing {
namespace {

using nlohmann::json;

// Formats kube-apiserver validates (apiextensions' supportedFormats, dashes removed as
// go-openapi normalizes names); every other format is dropped before validation.
const std::set<std::string>& supported_formats() {
  static const std::set<std::string> formats = {
      "bsonobjectid", "uri",    "email",    "hostname",   "ipv4",     "ipv6",
      "cidr",         "mac",    "uuid",     "uuid3",      "uuid4",    "uuid5",
      "isbn",         "isbn10", "isbn13",   "creditcard", "ssn",      "hexcolor",
      "rgbcolor",     "byte",   "password", "date",       "duration", "datetime"};
  return formats;
}

// Keywords a structural schema may carry that change nothing here.
const std::set<std::string>& descriptive_keywords() {
  static const std::set<std::string> keywords = {"description", "title", "example", "externalDocs",
                                                 "x-kubernetes-map-type"};
  return keywords;
}

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw std::invalid_argument(path + ": " + message);
}

const std::string& expect_string(const json& value, const std::string& path) {
  if (!value.is_string()) fail(path, "Invalid value: must be a string");
  return value.get_ref<const std::string&>();
}

bool expect_bool(const json& value, const std::string& path) {
  if (!value.is_boolean()) fail(path, "Invalid value: must be a boolean");
  return value.get<bool>();
}

double expect_number(const json& value, const std::string& path) {
  if (!value.is_number()) fail(path, "Invalid value: must be a number");
  return value.get<double>();
}

std::int64_t expect_count(const json& value, const std::string& path) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0) {
    fail(path, "Invalid value: must be a non-negative integer");
  }
  return value.get<std::int64_t>();
}

// controller-gen writes IntOrString as x-kubernetes-int-or-string plus
// anyOf: [{type: integer}, {type: string}], which adds nothing to the int-or-string typing.
bool is_int_or_string_alternatives(const json& alternatives) {
  if (!alternatives.is_array()) return false;
  return std::all_of(alternatives.begin(), alternatives.end(), [](const json& branch) {
    return branch.is_object() && branch.size() == 1 && branch.contains("type") &&
           (branch["type"] == "integer" || branch["type"] == "string");
  });
}

void parse_keyword(SchemaNode& node, const std::string& key, const json& value,
                   const std::string& path, const json& schema) {
  const std::string at = path + "." + key;
  if (key == "type") {
    const std::string& type = expect_string(value, at);
    static const std::set<std::string> types = {"array",  "boolean", "integer",
                                                "number", "object",  "string"};
    if (types.count(type) == 0) {
      fail(at, "Unsupported value: \"" + type +
                   "\": supported values: \"array\", \"boolean\", \"integer\", \"number\", "
                   "\"object\", \"string\"");
    }
    node.types = {type};
  } else if (key == "nullable") {
    node.nullable = expect_bool(value, at);
  } else if (key == "format") {
    std::string normalized = expect_string(value, at);
    normalized.erase(std::remove(normalized.begin(), normalized.end(), '-'), normalized.end());
    if (supported_formats().count(normalized) > 0) node.format = value.get<std::string>();
  } else if (key == "maximum") {
    node.maximum = expect_number(value, at);
  } else if (key == "exclusiveMaximum") {
    node.exclusive_maximum = expect_bool(value, at);
  } else if (key == "minimum") {
    node.minimum = expect_number(value, at);
  } else if (key == "exclusiveMinimum") {
    node.exclusive_minimum = expect_bool(value, at);
  } else if (key == "multipleOf") {
    if (expect_number(value, at) <= 0) fail(at, "Invalid value: must be greater than zero");
    node.multiple_of = value.get<double>();
  } else if (key == "maxLength") {
    node.max_length = expect_count(value, at);
  } else if (key == "minLength") {
    node.min_length = expect_count(value, at);
  } else if (key == "pattern") {
    node.pattern = expect_string(value, at);
    try {
      node.pattern_regex.emplace(node.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& error) {
      fail(at, "Invalid value: \"" + node.pattern +
                   "\": must be a valid regular expression, but isn't: " + error.what());
    }
  } else if (key == "maxItems") {
    node.max_items = expect_count(value, at);
  } else if (key == "minItems") {
    node.min_items = expect_count(value, at);
  } else if (key == "maxProperties") {
    node.max_properties = expect_count(value, at);
  } else if (key == "minProperties") {
    node.min_properties = expect_count(value, at);
  } else if (key == "uniqueItems") {
    if (expect_bool(value, at)) {
      fail(at,
           "Forbidden: uniqueItems cannot be set to true since the runtime complexity "
           "becomes quadratic");
    }
  } else if (key == "enum") {
    if (!value.is_array()) fail(at, "Invalid value: must be an array");
    node.enum_values = std::vector<json>(value.begin(), value.end());
  } else if (key == "default") {
    node.default_value = value;
  } else if (key == "required") {
    if (!value.is_array()) fail(at, "Invalid value: must be an array of strings");
    for (std::size_t i = 0; i < value.size(); ++i) {
      node.required.push_back(expect_string(value[i], at + "[" + std::to_string(i) + "]"));
    }
  } else if (key == "properties") {
    if (!value.is_object()) fail(at, "Invalid value: must be an object");
    for (const auto& [name, property] : value.items()) {
      node.properties[name] = parse_schema_node(property, at + "[" + name + "]");
    }
  } else if (key == "items") {
    if (!value.is_object()) fail(at, "Forbidden: items must be a schema object, not an array");
    node.items = parse_schema_node(value, at);
  } else if (key == "additionalProperties") {
    if (value.is_boolean()) {
      if (!value.get<bool>()) fail(at, "Forbidden: additionalProperties: false is not allowed");
      node.additional_properties_any = true;
    } else {
      node.additional_properties = parse_schema_node(value, at);
    }
  } else if (key == "x-kubernetes-preserve-unknown-fields") {
    if (!expect_bool(value, at)) fail(at, "Invalid value: false: must be true or undefined");
    node.preserve_unknown_fields = true;
  } else if (key == "x-kubernetes-embedded-resource") {
    node.embedded_resource = expect_bool(value, at);
  } else if (key == "x-kubernetes-int-or-string") {
    node.int_or_string = expect_bool(value, at);
  } else if (key == "x-kubernetes-list-type") {
    node.list_type = expect_string(value, at);
    if (node.list_type != "atomic" && node.list_type != "set" && node.list_type != "map") {
      fail(at, "Unsupported value: \"" + node.list_type +
                   "\": supported values: \"atomic\", \"set\", \"map\"");
    }
  } else if (key == "x-kubernetes-list-map-keys") {
    if (!value.is_array()) fail(at, "Invalid value: must be an array of strings");
    for (std::size_t i = 0; i < value.size(); ++i) {
      node.list_map_keys.push_back(expect_string(value[i], at + "[" + std::to_string(i) + "]"));
    }
  } else if (key == "anyOf" || key == "oneOf") {
    if (!schema.value("x-kubernetes-int-or-string", false) ||
        !is_int_or_string_alternatives(value)) {
      fail(at, "Forbidden: " + key +
                   " is not supported by the test server (only the int-or-string form "
                   "[{type: integer}, {type: string}])");
    }
  } else if (key == "x-kubernetes-validations") {
    fail(at, "Forbidden: validation rules (CEL) are not supported by the test server");
  } else if (key == "allOf" || key == "not") {
    fail(at, "Forbidden: " + key + " is not supported by the test server");
  } else if (key == "$ref" || key == "$schema" || key == "id" || key == "definitions" ||
             key == "dependencies" || key == "patternProperties" || key == "additionalItems") {
    fail(at, "Forbidden: " + key + " is not supported in a structural schema");
  } else if (descriptive_keywords().count(key) == 0) {
    fail(at, "Forbidden: unknown schema keyword");
  }
}

void check_structure(const SchemaNode& node, const std::string& path) {
  if (node.types.empty() && !node.preserve_unknown_fields) {
    fail(path + ".type", "Required value: must not be empty for specified object fields");
  }
  if (node.has_type("array") && !node.items)
    fail(path + ".items", "Required value: must be specified");
  if (!node.properties.empty() && (node.additional_properties || node.additional_properties_any)) {
    fail(path + ".additionalProperties",
         "Forbidden: additionalProperties and properties are mutual exclusive");
  }
  if (node.embedded_resource && !node.has_type("object")) {
    fail(path + ".type", "Invalid value: must be object if x-kubernetes-embedded-resource is true");
  }
  if (!node.list_type.empty() && !node.has_type("array")) {
    fail(path + ".x-kubernetes-list-type",
         "Invalid value: \"" + node.list_type + "\": must only be used on type array");
  }
  if (node.list_type == "map") {
    if (node.list_map_keys.empty()) {
      fail(path + ".x-kubernetes-list-map-keys",
           "Required value: must not be empty if x-kubernetes-list-type is map");
    }
    if (!node.items->has_type("object")) {
      fail(path + ".items.type", "Invalid value: must be object for x-kubernetes-list-type map");
    }
    for (const auto& key : node.list_map_keys) {
      if (node.items->properties.count(key) == 0) {
        fail(path + ".items.properties[" + key + "]",
             "Required value: entries for x-kubernetes-list-map-keys must be properties");
      }
    }
  } else if (!node.list_map_keys.empty()) {
    fail(path + ".x-kubernetes-list-map-keys",
         "Forbidden: must be empty if x-kubernetes-list-type is not map");
  }
}

}  // namespace

bool SchemaNode::has_type(const std::string& type) const {
  return std::find(types.begin(), types.end(), type) != types.end();
}

std::shared_ptr<const SchemaNode> parse_schema_node(const json& schema, const std::string& path) {
  if (!schema.is_object()) fail(path, "Invalid value: a schema must be an object");
  auto node = std::make_shared<SchemaNode>();
  for (const auto& [key, value] : schema.items()) parse_keyword(*node, key, value, path, schema);
  if (node->int_or_string) {
    if (!node->types.empty()) {
      fail(path + ".type", "Invalid value: \"" + node->types.front() +
                               "\": must be empty if x-kubernetes-int-or-string is true");
    }
    node->types = {"integer", "string"};
  }
  check_structure(*node, path);
  return node;
}

}  // namespace tessel::testing
