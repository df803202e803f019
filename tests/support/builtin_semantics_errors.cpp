#include "tests/support/builtin_semantics_errors.h"

#include <cstdio>
#include <map>
#include <regex>

#include "tests/support/structural_schema_errors.h"

namespace tessel::testing::validation {
namespace {

using json = nlohmann::json;

constexpr std::size_t kDns1123LabelMaxLength = 63;
constexpr std::size_t kDns1123SubdomainMaxLength = 253;
constexpr std::size_t kQualifiedNameMaxLength = 63;
constexpr std::size_t kLabelValueMaxLength = 63;

const std::string kDns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const std::string kDns1123SubdomainFmt = kDns1123LabelFmt + "(\\." + kDns1123LabelFmt + ")*";
const std::string kDns1035LabelFmt = "[a-z]([-a-z0-9]*[a-z0-9])?";
const std::string kQualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const std::string kLabelValueFmt = "(" + kQualifiedNameFmt + ")?";
const std::string kConfigMapKeyFmt = "[-._a-zA-Z0-9]+";
const std::string kEnvVarNameFmt = "[-._a-zA-Z][-._a-zA-Z0-9]*";

// Compiled once per pattern (the patterns are the constants above and a few literals); reading a
// const std::regex from several threads is safe.
bool full_match(const std::string& value, const std::string& pattern) {
  static const std::map<std::string, std::regex> compiled = [] {
    std::map<std::string, std::regex> out;
    for (const auto& p : {kDns1123LabelFmt, kDns1123SubdomainFmt, kDns1035LabelFmt,
                          kQualifiedNameFmt, kLabelValueFmt, kConfigMapKeyFmt, kEnvVarNameFmt,
                          std::string("[-a-z0-9]+"), std::string(".*[a-z].*")}) {
      out.emplace(p, std::regex(p));
    }
    return out;
  }();
  return std::regex_match(value, compiled.at(pattern));
}

std::string max_len_error(std::size_t n) {
  return "must be no more than " + std::to_string(n) + " characters";
}

// apimachinery's RegexError: "<msg> (e.g. 'a',  or 'b', regex used for validation is '<fmt>')".
std::string regex_error(const std::string& message, const std::string& fmt,
                        std::initializer_list<const char*> examples) {
  std::string out = message;
  if (examples.size() == 0) return out + " (regex used for validation is '" + fmt + "')";
  out += " (e.g. ";
  bool first = true;
  for (const char* e : examples) {
    if (!first) out += " or ";
    out += "'" + std::string(e) + "', ";
    first = false;
  }
  return out + "regex used for validation is '" + fmt + "')";
}

FieldError make(const char* reason, const std::string& field, std::string message) {
  return {reason, field, std::move(message)};
}

}  // namespace

std::string go_value(const json& value) {
  if (value.is_null()) return "null";
  if (value.is_string()) return go_quote(value.get<std::string>());
  if (value.is_array()) {
    bool strings = true;
    for (const auto& v : value) strings = strings && v.is_string();
    if (strings) {
      std::string out = "[]string{";
      for (std::size_t i = 0; i < value.size(); ++i) {
        out += (i > 0 ? ", " : "") + go_quote(value[i].get<std::string>());
      }
      return out + "}";
    }
  }
  return value.dump();
}

FieldError required(const std::string& field, const std::string& detail) {
  return make("FieldValueRequired", field,
              "Required value" + (detail.empty() ? "" : ": " + detail));
}

FieldError forbidden(const std::string& field, const std::string& detail) {
  return make("FieldValueForbidden", field, "Forbidden" + (detail.empty() ? "" : ": " + detail));
}

FieldError invalid(const std::string& field, const json& value, const std::string& detail) {
  return make("FieldValueInvalid", field,
              "Invalid value: " + go_value(value) + (detail.empty() ? "" : ": " + detail));
}

FieldError not_supported(const std::string& field, const json& value,
                         const std::vector<std::string>& supported) {
  std::string list;
  for (const auto& s : supported) list += (list.empty() ? "" : ", ") + go_quote(s);
  return make("FieldValueNotSupported", field,
              "Unsupported value: " + go_value(value) + ": supported values: " + list);
}

FieldError duplicate(const std::string& field, const json& value) {
  return make("FieldValueDuplicate", field, "Duplicate value: " + go_value(value));
}

FieldError not_found(const std::string& field, const json& value) {
  return make("FieldValueNotFound", field, "Not found: " + go_value(value));
}

FieldError too_long(const std::string& field, std::size_t max_bytes) {
  return make("FieldValueTooLong", field,
              "Too long: must have at most " + std::to_string(max_bytes) + " bytes");
}

std::vector<std::string> dns1123_subdomain(const std::string& value) {
  std::vector<std::string> out;
  if (value.size() > kDns1123SubdomainMaxLength) {
    out.push_back(max_len_error(kDns1123SubdomainMaxLength));
  }
  if (!full_match(value, kDns1123SubdomainFmt)) {
    out.push_back(regex_error(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character",
        kDns1123SubdomainFmt, {"example.com"}));
  }
  return out;
}

std::vector<std::string> dns1123_label(const std::string& value) {
  std::vector<std::string> out;
  if (value.size() > kDns1123LabelMaxLength) out.push_back(max_len_error(kDns1123LabelMaxLength));
  if (!full_match(value, kDns1123LabelFmt)) {
    out.push_back(regex_error(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character",
        kDns1123LabelFmt, {"my-name", "123-abc"}));
  }
  return out;
}

std::vector<std::string> dns1035_label(const std::string& value) {
  std::vector<std::string> out;
  if (value.size() > kDns1123LabelMaxLength) out.push_back(max_len_error(kDns1123LabelMaxLength));
  if (!full_match(value, kDns1035LabelFmt)) {
    out.push_back(regex_error(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character",
        kDns1035LabelFmt, {"my-name", "abc-123"}));
  }
  return out;
}

std::vector<std::string> qualified_name(const std::string& value) {
  const std::string message =
      "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
      "alphanumeric character";
  std::vector<std::string> out;
  std::string name = value;
  const auto slash = value.find('/');
  if (slash != std::string::npos) {
    if (value.find('/', slash + 1) != std::string::npos) {
      return {"a qualified name " +
              regex_error(message, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"}) +
              " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"};
    }
    const std::string prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      out.push_back("prefix part must be non-empty");
    } else {
      for (const auto& m : dns1123_subdomain(prefix)) out.push_back("prefix part " + m);
    }
  }
  if (name.empty()) {
    out.push_back("name part must be non-empty");
  } else if (name.size() > kQualifiedNameMaxLength) {
    out.push_back("name part " + max_len_error(kQualifiedNameMaxLength));
  }
  if (!full_match(name, kQualifiedNameFmt)) {
    out.push_back("name part " +
                  regex_error(message, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"}));
  }
  return out;
}

std::vector<std::string> label_value(const std::string& value) {
  std::vector<std::string> out;
  if (value.size() > kLabelValueMaxLength) out.push_back(max_len_error(kLabelValueMaxLength));
  if (!full_match(value, kLabelValueFmt)) {
    out.push_back(regex_error(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character",
        kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  }
  return out;
}

std::vector<std::string> config_map_key(const std::string& value) {
  std::vector<std::string> out;
  if (value.size() > kDns1123SubdomainMaxLength) {
    out.push_back(max_len_error(kDns1123SubdomainMaxLength));
  }
  if (!full_match(value, kConfigMapKeyFmt)) {
    out.push_back(
        regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                    kConfigMapKeyFmt, {"key.name", "KEY_NAME", "key-name"}));
  }
  if (value == ".") {
    out.push_back("must not be '.'");
  } else if (value == "..") {
    out.push_back("must not be '..'");
  } else if (value.starts_with("..")) {
    out.push_back("must not start with '..'");
  }
  return out;
}

std::vector<std::string> env_var_name(const std::string& value) {
  std::vector<std::string> out;
  if (!full_match(value, kEnvVarNameFmt)) {
    out.push_back(regex_error(
        "a valid environment variable name must consist of alphabetic characters, digits, '_', "
        "'-', or '.', and must not start with a digit",
        kEnvVarNameFmt, {"my.env-name", "MY_ENV.NAME", "MyEnvName1"}));
  }
  if (value == ".") {
    out.push_back("must not be '.'");
  } else if (value == "..") {
    out.push_back("must not be '..'");
  } else if (value.starts_with("..")) {
    out.push_back("must not start with '..'");
  }
  return out;
}

std::vector<std::string> port_name(const std::string& value) {
  std::vector<std::string> out;
  if (value.size() > 15) out.push_back(max_len_error(15));
  if (!full_match(value, "[-a-z0-9]+")) {
    out.push_back("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
  }
  if (!full_match(value, ".*[a-z].*")) out.push_back("must contain at least one letter (a-z)");
  if (value.find("--") != std::string::npos) {
    out.push_back("must not contain consecutive hyphens");
  }
  if (!value.empty() && (value.front() == '-' || value.back() == '-')) {
    out.push_back("must not begin or end with a hyphen");
  }
  return out;
}

namespace {
// generateName may end in '-'. apimachinery replaces the last two characters by an 'a' before
// checking it (sic), so "ab-" is checked as "aa".
std::string mask_trailing_dash(const std::string& name) {
  if (name.size() > 1 && name.back() == '-') return name.substr(0, name.size() - 2) + "a";
  return name;
}
}  // namespace

std::vector<std::string> name_is_dns1123_subdomain(const std::string& name, bool prefix) {
  return dns1123_subdomain(prefix ? mask_trailing_dash(name) : name);
}

std::vector<std::string> name_is_dns1123_label(const std::string& name, bool prefix) {
  return dns1123_label(prefix ? mask_trailing_dash(name) : name);
}

std::vector<std::string> name_is_dns1035_label(const std::string& name, bool prefix) {
  return dns1035_label(prefix ? mask_trailing_dash(name) : name);
}

std::vector<std::string> path_segment_name(const std::string& name, bool prefix) {
  if (!prefix) {
    for (const char* illegal : {".", ".."}) {
      if (name == illegal) return {"may not be '" + std::string(illegal) + "'"};
    }
  }
  std::vector<std::string> out;
  for (const char* illegal : {"/", "%"}) {
    if (name.find(illegal) != std::string::npos) {
      out.push_back("may not contain '" + std::string(illegal) + "'");
    }
  }
  return out;
}

std::string index(const std::string& field, std::size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

std::string key(const std::string& field, const std::string& k) { return field + "[" + k + "]"; }

void append(std::vector<FieldError>& to, const std::vector<FieldError>& more) {
  to.insert(to.end(), more.begin(), more.end());
}

}  // namespace tessel::testing::validation
