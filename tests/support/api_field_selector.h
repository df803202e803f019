// ?fieldSelector= as kube-apiserver v1.26 reads it: k8s.io/apimachinery's fields.ParseSelector
// (terms `field=value`, `field==value`, `field!=value`, comma-separated, all of which must hold;
// in a value `\,`, `\=` and `\\` stand for ',', '=' and '\'), with its error messages. Which
// fields a resource supports is the list's decision (api_list.h). The server's own reading,
// independent of kube/'s client code.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::testing {

struct FieldRequirement {
  std::string field;   // as written, not trimmed: "metadata.name"
  bool equals = true;  // false for !=
  std::string value;   // unescaped

  bool operator==(const FieldRequirement&) const = default;
};

class FieldSelector {
 public:
  FieldSelector() = default;  // matches everything

  // Throws std::invalid_argument whose what() is kube-apiserver's message, e.g. "invalid
  // selector: 'a'; can't understand 'a'" or "invalid field selector: invalid escape sequence:
  // \x".
  static FieldSelector parse(std::string_view text);

  // Reads each field as a dotted path into the object: strings as they are, other scalars in
  // their JSON form, anything missing or structured as "".
  bool matches(const nlohmann::json& object) const;
  bool empty() const { return requirements_.empty(); }
  // In the order fields.ParseSelector leaves them (its terms sorted as text).
  const std::vector<FieldRequirement>& requirements() const { return requirements_; }
  // The value the selector requires `field` to equal, if it has such a term (the first).
  std::optional<std::string> required_value(std::string_view field) const;

 private:
  std::vector<FieldRequirement> requirements_;
};

}  // namespace tessel::testing
