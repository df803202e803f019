#include "tests/support/structural_schema_errors.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>
#include <utility>

namespace tessel::testing {
namespace {

FieldError make_error(const char* reason, std::string field, std::string body,
                      const std::string& detail) {
  if (!detail.empty()) body += ": " + detail;
  return FieldError{reason, std::move(field), std::move(body)};
}

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not valid.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  std::size_t length = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return 0;
  }
  return length;
}

// Go's %#v of a value inside a map[string]interface{} or []interface{}.
std::string go_sharp_value_text(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "interface {}(nil)";
    case nlohmann::json::value_t::object: {
      std::string text = "map[string]interface {}{";
      bool first = true;
      for (const auto& [key, item] : value.items()) {  // nlohmann keeps keys sorted, as fmt does
        if (!first) text += ", ";
        first = false;
        text += go_quote(key) + ":" + go_sharp_value_text(item);
      }
      return text + "}";
    }
    case nlohmann::json::value_t::array: {
      std::string text = "[]interface {}{";
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (i > 0) text += ", ";
        text += go_sharp_value_text(value[i]);
      }
      return text + "}";
    }
    default:
      return go_value_text(value);
  }
}

}  // namespace

FieldError field_required(std::string field, const std::string& detail) {
  return make_error("FieldValueRequired", std::move(field), "Required value", detail);
}

FieldError field_forbidden(std::string field, const std::string& detail) {
  return make_error("FieldValueForbidden", std::move(field), "Forbidden", detail);
}

FieldError field_invalid(std::string field, const nlohmann::json& value,
                         const std::string& detail) {
  return make_error("FieldValueInvalid", std::move(field), "Invalid value: " + go_value_text(value),
                    detail);
}

FieldError field_type_invalid(std::string field, const nlohmann::json& value,
                              const std::string& detail) {
  return make_error("FieldValueTypeInvalid", std::move(field),
                    "Invalid value: " + go_value_text(value), detail);
}

FieldError field_not_supported(std::string field, const nlohmann::json& value,
                               const std::vector<std::string>& supported) {
  std::string detail;
  if (!supported.empty()) {
    detail = "supported values: ";
    for (std::size_t i = 0; i < supported.size(); ++i) {
      if (i > 0) detail += ", ";
      detail += go_quote(supported[i]);
    }
  }
  return make_error("FieldValueNotSupported", std::move(field),
                    "Unsupported value: " + go_value_text(value), detail);
}

FieldError field_duplicate(std::string field, const nlohmann::json& value) {
  return make_error("FieldValueDuplicate", std::move(field),
                    "Duplicate value: " + go_value_text(value), "");
}

FieldError field_too_long(std::string field, std::int64_t max_length) {
  const std::string detail = max_length >= 0
                                 ? "may not be longer than " + std::to_string(max_length)
                                 : std::string("value is too long");
  return make_error("FieldValueTooLong", std::move(field), "Too long", detail);
}

FieldError field_too_many(std::string field, std::int64_t actual, std::int64_t max) {
  const std::string detail = max >= 0 ? "must have at most " + std::to_string(max) + " items"
                                      : std::string("has too many items");
  return make_error("FieldValueTooMany", std::move(field), "Too many: " + std::to_string(actual),
                    detail);
}

std::string field_error_string(const FieldError& error) {
  return error.field + ": " + error.message;
}

std::string go_quote(const std::string& text) {
  std::string quoted = "\"";
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t length = utf8_sequence_length(text, i);
      if (length > 0) {
        quoted.append(text, i, length);
        i += length;
        continue;
      }
    }
    switch (c) {
      case '\a':
        quoted += "\\a";
        break;
      case '\b':
        quoted += "\\b";
        break;
      case '\f':
        quoted += "\\f";
        break;
      case '\n':
        quoted += "\\n";
        break;
      case '\r':
        quoted += "\\r";
        break;
      case '\t':
        quoted += "\\t";
        break;
      case '\v':
        quoted += "\\v";
        break;
      case '\\':
        quoted += "\\\\";
        break;
      case '"':
        quoted += "\\\"";
        break;
      default:
        if (c < 0x20 || c >= 0x7F) {
          char escaped[5];
          std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
          quoted += escaped;
        } else {
          quoted += static_cast<char>(c);
        }
    }
    ++i;
  }
  return quoted + "\"";
}

std::string go_float_text(double value) {
  if (value == 0) return "0";
  // Go's %v is strconv's shortest %g: an exponent below 1e-4 and from 1e+06 on.
  char buffer[64];
  auto scientific =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string text(buffer, scientific.ptr);
  const int exponent = std::stoi(text.substr(text.find('e') + 1));
  if (exponent < -4 || exponent >= 6) return text;
  auto fixed = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed);
  return std::string(buffer, fixed.ptr);
}

std::string go_value_text(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return go_quote("null");
    case nlohmann::json::value_t::string:
      return go_quote(value.get<std::string>());
    case nlohmann::json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::number_integer:
      return std::to_string(value.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return std::to_string(value.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float:
      return go_float_text(value.get<double>());
    default:
      return go_sharp_value_text(value);
  }
}

nlohmann::json invalid_status(const std::string& kind, const std::string& group,
                              const std::string& name, const std::vector<FieldError>& errors) {
  const std::string qualified_kind = group.empty() ? kind : kind + "." + group;
  std::string message = qualified_kind + " " + go_quote(name) + " is invalid";
  // The message lists each distinct error once (field.ErrorList.ToAggregate); the causes keep
  // every one.
  std::vector<std::string> distinct;
  for (const auto& error : errors) {
    const std::string text = field_error_string(error);
    if (std::find(distinct.begin(), distinct.end(), text) == distinct.end()) {
      distinct.push_back(text);
    }
  }
  if (distinct.size() == 1) {
    message += ": " + distinct.front();
  } else if (!distinct.empty()) {
    message += ": [";
    for (std::size_t i = 0; i < distinct.size(); ++i) {
      if (i > 0) message += ", ";
      message += distinct[i];
    }
    message += "]";
  }
  nlohmann::json causes = nlohmann::json::array();
  for (const auto& error : errors) {
    causes.push_back({{"reason", error.type}, {"message", error.message}, {"field", error.field}});
  }
  nlohmann::json details = {{"kind", kind}, {"causes", causes}};
  if (!name.empty()) details["name"] = name;
  if (!group.empty()) details["group"] = group;
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", "Invalid"},
          {"details", details},  {"code", 422}};
}

}  // namespace tessel::testing
