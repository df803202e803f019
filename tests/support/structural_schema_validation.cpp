// StructuralSchema::validate and validate_status: kube-openapi's SchemaValidator as the
// apiextensions server runs it (validators in its order: type, string, format, number, array,
// enum, object; properties in name order; required last), each failure turned into the field
// error apiextensions' ValidateCustomResource makes of it; then the x-kubernetes-list-type
// checks (structurallisttype.ValidateListSetsAndMaps).
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

#include "tests/support/structural_schema.h"
#include "tests/support/structural_schema_errors.h"
#include "tests/support/structural_schema_formats.h"
#include "tests/support/structural_schema_node.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

// The Go type a JSON value has after kube-apiserver's unstructured decoding.
enum class GoKind { kNil, kBool, kInt64, kFloat64, kString, kSlice, kMap };

GoKind go_kind(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return GoKind::kNil;
    case json::value_t::boolean:
      return GoKind::kBool;
    case json::value_t::number_integer:
      return GoKind::kInt64;
    case json::value_t::number_unsigned:
      return value.get<std::uint64_t>() >
                     static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                 ? GoKind::kFloat64
                 : GoKind::kInt64;
    case json::value_t::number_float:
      return GoKind::kFloat64;
    case json::value_t::string:
      return GoKind::kString;
    case json::value_t::array:
      return GoKind::kSlice;
    default:
      return GoKind::kMap;
  }
}

// The JSON schema type and format go-openapi infers from a Go value.
std::pair<std::string, std::string> schema_info(GoKind kind) {
  switch (kind) {
    case GoKind::kBool:
      return {"boolean", ""};
    case GoKind::kInt64:
      return {"integer", "int64"};
    case GoKind::kFloat64:
      return {"number", "float64"};
    case GoKind::kString:
      return {"string", ""};
    case GoKind::kSlice:
      return {"array", ""};
    default:
      return {"object", ""};
  }
}

// swag.IsFloat64AJSONInteger.
bool is_json_integer(double value) {
  if (std::isnan(value) || std::isinf(value)) return false;
  if (std::fabs(value) > 9007199254740992.0) return false;  // beyond 2^53
  return value == std::trunc(value) ||
         std::fabs(value - std::round(value)) < 1e-9 * std::max(1.0, std::fabs(value));
}

std::string join_types(const std::vector<std::string>& types) {
  std::string joined;
  for (const auto& type : types) joined += (joined.empty() ? "" : ",") + type;
  return joined;
}

// An enum value as apiextensions lists it among the supported values: strings as they are,
// anything else as its JSON (numbers from the CRD are float64 in Go: 1, not 1.0).
std::string enum_value_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float() && is_json_integer(value.get<double>())) {
    return std::to_string(static_cast<std::int64_t>(value.get<double>()));
  }
  return value.dump();
}

// Whether data equals an enum value after Go's conversion of data to the value's type (the
// CRD's enum numbers are float64 in Go; null never matches).
bool enum_matches(const json& data, const json& candidate) {
  if (data.is_null() || candidate.is_null()) return false;
  if (data.is_number() && candidate.is_number())
    return data.get<double>() == candidate.get<double>();
  return data == candidate;
}

std::int64_t rune_count(const std::string& text) {
  std::int64_t count = 0;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;
  }
  return count;
}

class Validator {
 public:
  // field_prefix: the field path the validated value sits at ("" for the whole object,
  // "status" for the status subresource's validator, whose messages name fields relative to it).
  Validator(std::string field_prefix, std::vector<FieldError>& errors)
      : field_prefix_(std::move(field_prefix)), errors_(errors) {}

  void validate(const SchemaNode& node, const json& data, const std::string& name) {
    const GoKind kind = go_kind(data);
    if (kind == GoKind::kNil) {
      validate_type(node, data, kind, name);
      validate_enum(node, data, name);
      return;
    }
    validate_type(node, data, kind, name);
    if (kind == GoKind::kString) {
      validate_string(node, data.get_ref<const std::string&>(), name);
      validate_format(node, data.get_ref<const std::string&>(), name);
    }
    if (kind == GoKind::kInt64 || kind == GoKind::kFloat64) validate_number(node, data, kind, name);
    if (kind == GoKind::kSlice) validate_array(node, data, name);
    validate_enum(node, data, name);
    if (kind == GoKind::kMap) validate_object(node, data, name);
  }

 private:
  // apiextensions turns the kube-openapi name (".spec.x" or "spec.x") into a field path.
  std::string field(const std::string& name) const {
    const std::string relative = !name.empty() && name[0] == '.' ? name.substr(1) : name;
    if (field_prefix_.empty()) return relative;
    return relative.empty() ? field_prefix_ : field_prefix_ + "." + relative;
  }

  void type_error(const std::string& name, const std::string& expected, const std::string& got) {
    errors_.push_back(field_type_invalid(
        field(name), got, name + " in body must be of type " + expected + ": " + go_quote(got)));
  }

  void validate_type(const SchemaNode& node, const json& data, GoKind kind,
                     const std::string& name) {
    if (node.types.empty() && node.format.empty()) return;
    if (kind == GoKind::kNil) {
      if (!node.types.empty() && !node.nullable) type_error(name, join_types(node.types), "null");
      return;
    }
    const auto [schema_type, format] = schema_info(kind);
    const bool float_int =
        kind == GoKind::kFloat64 && is_json_integer(data.get<double>()) && node.has_type("integer");
    const bool int_float = kind == GoKind::kInt64 && node.has_type("number");
    const bool has_schema_type = node.has_type(schema_type);
    if (kind != GoKind::kString && kind != GoKind::kSlice && !node.format.empty() &&
        !(has_schema_type || format == node.format || float_int || int_float)) {
      type_error(name, node.format, format);
      return;
    }
    if (!node.has_type("number") && !node.has_type("integer") && !node.format.empty() &&
        (kind == GoKind::kString || kind == GoKind::kSlice)) {
      return;
    }
    if (!(has_schema_type || float_int || int_float)) {
      type_error(name, join_types(node.types), schema_type);
    }
  }

  void validate_string(const SchemaNode& node, const std::string& text, const std::string& name) {
    const std::int64_t length = rune_count(text);
    if (node.max_length && length > *node.max_length) {
      errors_.push_back(field_too_long(field(name), *node.max_length));
    } else if (node.min_length && length < *node.min_length) {
      errors_.push_back(field_invalid(field(name), text,
                                      name + " in body should be at least " +
                                          std::to_string(*node.min_length) + " chars long"));
    } else if (node.pattern_regex && !std::regex_search(text, *node.pattern_regex)) {
      errors_.push_back(
          field_invalid(field(name), text, name + " in body should match '" + node.pattern + "'"));
    }
  }

  void validate_format(const SchemaNode& node, const std::string& text, const std::string& name) {
    if (node.format.empty() || format_accepts(node.format, text)) return;
    errors_.push_back(field_type_invalid(
        field(name), text,
        name + " in body must be of type " + node.format + ": " + go_quote(text)));
  }

  void validate_number(const SchemaNode& node, const json& data, GoKind kind,
                       const std::string& name) {
    const bool integer = kind == GoKind::kInt64;
    // Integer data is compared with the bound truncated to an integer, as go-openapi does.
    auto bound_text = [&](double bound) {
      return integer ? std::to_string(static_cast<std::int64_t>(bound)) : go_float_text(bound);
    };
    if (node.multiple_of) {
      const double factor = *node.multiple_of;
      const auto int_factor = static_cast<std::int64_t>(factor);
      bool multiple;
      std::string factor_text;
      if (integer && int_factor != 0) {
        multiple = data.get<std::int64_t>() % int_factor == 0;
        factor_text = std::to_string(int_factor);
      } else {
        const double value = data.get<double>();
        multiple = is_json_integer(factor < 1 ? 1 / factor * value : value / factor);
        factor_text = go_float_text(factor);
      }
      if (!multiple) {
        errors_.push_back(field_invalid(field(name), data,
                                        name + " in body should be a multiple of " + factor_text));
      }
    }
    if (node.minimum) {
      const bool below =
          integer ? below_int(data.get<std::int64_t>(), *node.minimum, node.exclusive_minimum)
                  : (node.exclusive_minimum ? data.get<double>() <= *node.minimum
                                            : data.get<double>() < *node.minimum);
      if (below) {
        errors_.push_back(field_invalid(field(name), data,
                                        name + " in body should be greater than " +
                                            (node.exclusive_minimum ? "" : "or equal to ") +
                                            bound_text(*node.minimum)));
      }
    }
    if (node.maximum) {
      const bool above =
          integer ? above_int(data.get<std::int64_t>(), *node.maximum, node.exclusive_maximum)
                  : (node.exclusive_maximum ? data.get<double>() >= *node.maximum
                                            : data.get<double>() > *node.maximum);
      if (above) {
        errors_.push_back(field_invalid(field(name), data,
                                        name + " in body should be less than " +
                                            (node.exclusive_maximum ? "" : "or equal to ") +
                                            bound_text(*node.maximum)));
      }
    }
  }

  static bool below_int(std::int64_t value, double bound, bool exclusive) {
    const auto min = static_cast<std::int64_t>(bound);
    return exclusive ? value <= min : value < min;
  }

  static bool above_int(std::int64_t value, double bound, bool exclusive) {
    const auto max = static_cast<std::int64_t>(bound);
    return exclusive ? value >= max : value > max;
  }

  void validate_array(const SchemaNode& node, const json& data, const std::string& name) {
    if (node.items) {
      for (std::size_t i = 0; i < data.size(); ++i) {
        validate(*node.items, data[i], name + "[" + std::to_string(i) + "]");
      }
    }
    const auto size = static_cast<std::int64_t>(data.size());
    if (node.min_items && size < *node.min_items) {
      errors_.push_back(field_invalid(
          field(name), size,
          name + " in body should have at least " + std::to_string(*node.min_items) + " items"));
    }
    if (node.max_items && size > *node.max_items) {
      errors_.push_back(field_too_many(field(name), size, *node.max_items));
    }
  }

  void validate_enum(const SchemaNode& node, const json& data, const std::string& name) {
    if (!node.enum_values) return;
    std::vector<std::string> supported;
    for (const auto& candidate : *node.enum_values) {
      if (enum_matches(data, candidate)) return;
      supported.push_back(enum_value_text(candidate));
    }
    errors_.push_back(field_not_supported(field(name), data, supported));
  }

  void validate_object(const SchemaNode& node, const json& data, const std::string& name) {
    const auto count = static_cast<std::int64_t>(data.size());
    if (node.min_properties && count < *node.min_properties) {
      errors_.push_back(field_invalid(field(name), count,
                                      name + " in body should have at least " +
                                          std::to_string(*node.min_properties) + " properties"));
      return;
    }
    if (node.max_properties && count > *node.max_properties) {
      errors_.push_back(field_too_many(field(name), count, *node.max_properties));
      return;
    }
    if (node.additional_properties) {
      for (const auto& [key, value] : data.items()) {
        if (node.properties.count(key) == 0) {
          validate(*node.additional_properties, value, name + "." + key);
        }
      }
    }
    for (const auto& [property, schema] : node.properties) {
      const auto value = data.find(property);
      if (value != data.end()) {
        validate(*schema, *value, name.empty() ? property : name + "." + property);
      }
    }
    for (const auto& property : node.required) {
      if (!data.contains(property)) errors_.push_back(field_required(field(name + "." + property)));
    }
  }

  std::string field_prefix_;
  std::vector<FieldError>& errors_;
};

// structurallisttype.ValidateListSetsAndMaps, with kube's field paths (map keys in brackets).
class ListTypeValidator {
 public:
  explicit ListTypeValidator(std::vector<FieldError>& errors) : errors_(errors) {}

  void validate_object(const SchemaNode& node, const json& object, const std::string& path) {
    if (node.additional_properties) {
      for (const auto& [key, value] : object.items()) {
        validate_value(*node.additional_properties, value, path + "[" + key + "]");
      }
    }
    for (const auto& [key, value] : object.items()) {
      const auto property = node.properties.find(key);
      if (property != node.properties.end()) {
        validate_value(*property->second, value, path.empty() ? key : path + "." + key);
      }
    }
  }

 private:
  void validate_value(const SchemaNode& node, const json& value, const std::string& path) {
    if (value.is_array()) {
      validate_array(node, value, path);
    } else if (value.is_object()) {
      validate_object(node, value, path);
    }
  }

  static std::string index(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  void validate_array(const SchemaNode& node, const json& array, const std::string& path) {
    if (node.list_type == "set") {
      // Each repeated value is reported once, at its second occurrence.
      std::vector<json> seen;
      std::vector<json> reported;
      for (std::size_t i = 0; i < array.size(); ++i) {
        if (std::find(seen.begin(), seen.end(), array[i]) == seen.end()) {
          seen.push_back(array[i]);
        } else if (std::find(reported.begin(), reported.end(), array[i]) == reported.end()) {
          reported.push_back(array[i]);
          errors_.push_back(field_duplicate(index(path, i), array[i]));
        }
      }
    } else if (node.list_type == "map") {
      validate_list_map(node, array, path);
    }
    if (node.items) {
      for (std::size_t i = 0; i < array.size(); ++i) {
        validate_value(*node.items, array[i], index(path, i));
      }
    }
  }

  void validate_list_map(const SchemaNode& node, const json& array, const std::string& path) {
    for (std::size_t i = 0; i < array.size(); ++i) {
      if (!array[i].is_null() && !array[i].is_object()) {
        errors_.push_back(field_invalid(index(path, i), array[i],
                                        "must be an object for an array of list-type map"));
        return;
      }
    }
    std::vector<json> seen;
    std::vector<json> reported;
    for (std::size_t i = 0; i < array.size(); ++i) {
      if (array[i].is_null()) continue;
      json key = json::object();
      for (const auto& name : node.list_map_keys) {
        const auto value = array[i].find(name);
        if (value != array[i].end()) {
          key[name] = *value;
        } else if (const auto& property = node.items->properties.at(name);
                   property->default_value) {
          key[name] = *property->default_value;
        }
      }
      if (std::find(seen.begin(), seen.end(), key) == seen.end()) {
        seen.push_back(key);
      } else if (std::find(reported.begin(), reported.end(), key) == reported.end()) {
        reported.push_back(key);
        errors_.push_back(field_duplicate(index(path, i), key));
      }
    }
  }

  std::vector<FieldError>& errors_;
};

}  // namespace

std::vector<FieldError> StructuralSchema::validate(const json& object) const {
  std::vector<FieldError> errors;
  Validator("", errors).validate(*root_, object, "");
  if (object.is_object()) ListTypeValidator(errors).validate_object(*root_, object, "");
  return errors;
}

std::vector<FieldError> StructuralSchema::validate_status(const json& object) const {
  std::vector<FieldError> errors;
  const auto status_schema = root_->properties.find("status");
  const auto status = object.find("status");
  if (status_schema != root_->properties.end() && status != object.end()) {
    Validator("status", errors).validate(*status_schema->second, *status, "");
  }
  if (object.is_object()) ListTypeValidator(errors).validate_object(*root_, object, "");
  return errors;
}

}  // namespace tessel::testing
