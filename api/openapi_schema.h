// A CRD version's openAPIV3Schema applied to an object the way kube-apiserver applies it on a
// write: defaults filled in, unknown fields refused (kubectl's default strict validation), and
// every value checked against its type, bounds, length, pattern, enum and list rules. Only the
// keywords crds/ uses are understood; a schema with any other is refused when loaded, so that
// a CRD edit cannot silently go unchecked here.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/manifest_error.h"

namespace tessel::api {

class OpenApiSchema {
 public:
  // Throws std::invalid_argument naming the schema path of a keyword it does not understand.
  explicit OpenApiSchema(const nlohmann::json& open_api_v3_schema);
  ~OpenApiSchema();
  OpenApiSchema(OpenApiSchema&&) noexcept;

  // Fills defaults where a field is absent, inside present objects only (never overwrites).
  void apply_defaults(nlohmann::json& object) const;
  // Every violation, in document order; field paths like "spec.template.env[2].name".
  std::vector<FieldError> validate(const nlohmann::json& object) const;
  // The schema at a dotted path of properties ("spec.parallelism"), for its bounds and enums.
  const nlohmann::json& at(const std::string& dotted_path) const;

  struct Node;  // one schema level, defined in the .cpp

 private:
  std::unique_ptr<Node> root_;
  nlohmann::json source_;
};

}  // namespace tessel::api
