// Field selectors in the string form of ?fieldSelector=, read as kube-apiserver reads them
// (k8s.io/apimachinery v0.26 fields.ParseSelector): comma-joined terms `field=value` (or `==`)
// and `field!=value`, split at the first operator of each term. In a value, `\,` `\=` and
// `\\` stand for `,` `=` and `\`; an unescaped `=` or any other escape is an error. Nothing
// is trimmed and empty terms are skipped. Which fields a resource supports is the server's
// decision (CRDs: only metadata.name and metadata.namespace; Pods add spec.nodeName,
// status.phase, ...), so the field is not checked here; matching reads the dotted path from
// the object, a missing field reading as "".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::kube {

struct FieldRequirement {
  std::string field;   // dotted path, e.g. metadata.name, spec.nodeName, status.phase
  bool equals = true;  // false for !=
  std::string value;   // unescaped
};

class FieldSelector {
 public:
  FieldSelector() = default;
  // Keeps the order given. Throws std::invalid_argument for a field that would not read back
  // as itself from to_string() (one holding `=`, `!=` before the operator, or an unescaped
  // `,`).
  explicit FieldSelector(std::vector<FieldRequirement> requirements);

  // The requirements come in the server's order: sorted by the text of their terms. Throws
  // std::invalid_argument: `invalid field selector "<text>": term "<term>": <fault>`.
  static FieldSelector parse(std::string_view text);

  bool matches(const nlohmann::json& obj) const;
  // Values escaped; parse(to_string()) gives back these requirements, in the server's order.
  std::string to_string() const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<FieldRequirement>& requirements() const { return requirements_; }

 private:
  std::vector<FieldRequirement> requirements_;
};

}  // namespace tessel::kube
