// Why a manifest was refused: every field at fault at once, each named by its path in the
// object ("spec.parallelism.stages"), as kube-apiserver lists a 422's causes.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::api {

struct FieldError {
  std::string field;    // "spec.parallelism.stages"; "" for the document itself
  std::string message;  // "must be >= 1, got 0"

  bool operator==(const FieldError&) const = default;
  std::string text() const { return field.empty() ? message : field + ": " + message; }
};

// Thrown with every FieldError of one manifest; what() is "<source>: <field>: <message>" for
// one error, and a line per error after "<source>: N errors:" for several.
class ManifestError : public std::runtime_error {
 public:
  ManifestError(std::string source, std::vector<FieldError> errors);
  const std::string& source() const { return source_; }
  const std::vector<FieldError>& errors() const { return errors_; }

 private:
  std::string source_;
  std::vector<FieldError> errors_;
};

}  // namespace tessel::api
