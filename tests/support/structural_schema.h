// A CustomResourceDefinition version's structural schema (openAPIV3Schema), doing what
// kube-apiserver's apiextensions server does with it for every write of a custom resource:
// pruning of unknown fields, defaulting, and validation, with errors worded as the real server
// words them (../shared/fixtures/kube-1.26: 422-invalid-schema.json,
// 400-strict-unknown-field.json).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::testing {

// One cause of a 422 Invalid (or of a built-in kind's validation), as a Status cause.
struct FieldError {
  std::string type;     // Status cause reason: "FieldValueRequired", "FieldValueInvalid",
                        // "FieldValueNotSupported", "FieldValueTypeInvalid", "FieldValueForbidden",
                        // "FieldValueDuplicate", "FieldValueTooLong", "FieldValueTooMany" ...
  std::string field;    // "spec.replicas", "metadata.finalizers[0]"
  std::string message;  // the cause's message exactly as kube-apiserver words it

  bool operator==(const FieldError&) const = default;
};

// The 422 Invalid Status body for these errors, worded as kube-apiserver words it, e.g.
// `TrainingJob.tessel.dev "x" is invalid: spec.stages: Invalid value: 0: ...`.
nlohmann::json invalid_status(const std::string& kind, const std::string& group,
                              const std::string& name, const std::vector<FieldError>& errors);

struct SchemaNode;  // structural_schema_node.h

class StructuralSchema {  // one CRD version's openAPIV3Schema
 public:
  // Throws std::invalid_argument naming the schema path of what is not understood or not
  // structural (e.g. `openAPIV3Schema.properties.spec.properties.replicas.type: ...`).
  explicit StructuralSchema(const nlohmann::json& open_api_v3_schema);

  // Removes fields the schema does not know (honouring x-kubernetes-preserve-unknown-fields,
  // additionalProperties, x-kubernetes-embedded-resource); never touches apiVersion, kind,
  // metadata at the root. Returns the removed fields' paths in the form the server's
  // warnings and strict-validation errors use ("spec.foo").
  std::vector<std::string> prune(nlohmann::json& object) const;
  // Fills schema defaults where a field is absent (inside arrays and additionalProperties
  // too); never overwrites a present value.
  void apply_defaults(nlohmann::json& object) const;
  // Every violation at once, in the order kube-apiserver reports them.
  std::vector<FieldError> validate(const nlohmann::json& object) const;
  // What kube-apiserver validates on a write through the status subresource: only .status,
  // against the status schema (messages then name fields relative to status, e.g.
  // `status.progress.step: Invalid value: -1: progress.step in body should be ...`), plus the
  // list-type checks on the whole object.
  std::vector<FieldError> validate_status(const nlohmann::json& object) const;

 private:
  std::shared_ptr<const SchemaNode> root_;
};

}  // namespace tessel::testing
