#include "api/manifest_text.h"

#include <algorithm>
#include <regex>

#include "placement/limits.h"

namespace tessel::api {

using nlohmann::json;

bool is_dns_subdomain(const std::string& name) {
  static const std::regex subdomain(
      "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return !name.empty() && name.size() <= 253 && std::regex_match(name, subdomain);
}

std::string shown_text(const std::string& text) {
  constexpr size_t kShown = 80;
  if (text.size() <= kShown) return text;
  size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "... (" + std::to_string(text.size()) + " bytes)";
}

std::string describe_json_value(const json& value) {
  if (value.is_number()) return placement::number_text(value.get<double>());
  if (value.is_string()) return "\"" + shown_text(value.get<std::string>()) + "\"";
  if (value.is_array()) {
    if (value.size() > 4 || std::any_of(value.begin(), value.end(),
                                        [](const json& item) { return item.is_structured(); })) {
      return "a list of " + std::to_string(value.size()) + " items";
    }
    std::string text = "[";
    for (const json& item : value)
      text += (text.size() > 1 ? ", " : "") + describe_json_value(item);
    return text + "]";
  }
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " fields";
  return value.type_name();
}

json parse_json_object(const std::string& text, size_t max_bytes, const std::string& field,
                       const std::string& source) {
  if (text.size() > max_bytes) {
    throw ManifestError(
        source, {{field, "is " + std::to_string(text.size()) + " bytes, more than the limit of " +
                             std::to_string(max_bytes)}});
  }
  json document = json::parse(text, nullptr, false);
  if (document.is_discarded() || !document.is_object()) {
    throw ManifestError(source, {{field, "is not a JSON object"}});
  }
  return document;
}

void add_unknown_field_errors(const json& object, std::initializer_list<std::string_view> known,
                              const std::string& at, std::vector<FieldError>& errors) {
  for (const auto& [key, unused] : object.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end())
      errors.push_back({at + "." + shown_text(key), "unknown field"});
  }
}

const json& field_of(const json& object, const char* key) {
  static const json null;
  const auto it = object.find(key);
  return it == object.end() ? null : *it;
}

}  // namespace tessel::api
