#include "api/manifest_error.h"

namespace tessel::api {
namespace {

std::string describe(const std::string& source, const std::vector<FieldError>& errors) {
  if (errors.size() == 1) return source + ": " + errors[0].text();
  std::string text = source + ": " + std::to_string(errors.size()) + " errors:";
  for (const FieldError& e : errors) text += "\n  " + e.text();
  return text;
}

}  // namespace

ManifestError::ManifestError(std::string source, std::vector<FieldError> errors)
    : std::runtime_error(describe(source, errors)),
      source_(std::move(source)),
      errors_(std::move(errors)) {}

}  // namespace tessel::api
