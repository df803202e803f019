// One node of a CRD version's structural schema, parsed from its openAPIV3Schema the way the
// apiextensions server reads it: unsupported formats (int32, int64, ...) stripped, as
// kube-apiserver does before validating; x-kubernetes-int-or-string turned into the types
// ["integer", "string"].
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace tessel::testing {

struct SchemaNode {
  std::vector<std::string> types;  // empty (any), one type, or {"integer", "string"}
  bool nullable = false;
  bool int_or_string = false;
  bool preserve_unknown_fields = false;
  bool embedded_resource = false;
  std::string format;  // only formats kube-apiserver validates; others are dropped

  std::optional<double> maximum;
  bool exclusive_maximum = false;
  std::optional<double> minimum;
  bool exclusive_minimum = false;
  std::optional<double> multiple_of;
  std::optional<std::int64_t> max_length;
  std::optional<std::int64_t> min_length;
  std::string pattern;  // as written, for messages
  std::optional<std::regex> pattern_regex;
  std::optional<std::int64_t> max_items;
  std::optional<std::int64_t> min_items;
  std::optional<std::int64_t> max_properties;
  std::optional<std::int64_t> min_properties;
  std::optional<std::vector<nlohmann::json>> enum_values;
  std::optional<nlohmann::json> default_value;

  std::map<std::string, std::shared_ptr<const SchemaNode>> properties;  // sorted by name
  std::vector<std::string> required;
  std::shared_ptr<const SchemaNode> items;
  // additionalProperties: a schema; or true without one (any value, nothing pruned below).
  std::shared_ptr<const SchemaNode> additional_properties;
  bool additional_properties_any = false;

  std::string list_type;  // x-kubernetes-list-type: "", "atomic", "set", "map"
  std::vector<std::string> list_map_keys;

  bool has_type(const std::string& type) const;
};

// Parses and checks one schema node; `path` names it in errors
// ("openAPIV3Schema.properties[spec]"). Throws std::invalid_argument for what is not a structural
// schema, or not supported here.
std::shared_ptr<const SchemaNode> parse_schema_node(const nlohmann::json& schema,
                                                    const std::string& path);

}  // namespace tessel::testing
