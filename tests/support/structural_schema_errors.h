// kube-apiserver's field errors (k8s.io/apimachinery/pkg/util/validation/field), worded as
// field.Error.ErrorBody() words them, so that every 422 cause of the test server reads like the
// real server's. Values are JSON values as Go's unstructured decoding holds them and formats
// them with fmt (%q for strings, %v for numbers and booleans, %#v for objects and arrays).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/structural_schema.h"

namespace tessel::testing {

// "Required value" (+ ": detail").
FieldError field_required(std::string field, const std::string& detail = "");
// "Forbidden: detail".
FieldError field_forbidden(std::string field, const std::string& detail);
// "Invalid value: <value>: detail".
FieldError field_invalid(std::string field, const nlohmann::json& value, const std::string& detail);
// "Invalid value: <value>: detail", reason FieldValueTypeInvalid.
FieldError field_type_invalid(std::string field, const nlohmann::json& value,
                              const std::string& detail);
// `Unsupported value: <value>: supported values: "a", "b"`.
FieldError field_not_supported(std::string field, const nlohmann::json& value,
                               const std::vector<std::string>& supported);
// "Duplicate value: <value>".
FieldError field_duplicate(std::string field, const nlohmann::json& value);
// "Too long: may not be longer than N" (max_length < 0: "Too long: value is too long").
FieldError field_too_long(std::string field, std::int64_t max_length);
// "Too many: A: must have at most N items".
FieldError field_too_many(std::string field, std::int64_t actual, std::int64_t max);

// "spec.replicas: Invalid value: 0: ..." as field.Error.Error() prints it.
std::string field_error_string(const FieldError& error);

// Go's strconv.Quote.
std::string go_quote(const std::string& text);
// Go's fmt %v of a float64 ("1", "0.5", "1e+06", "1e-05").
std::string go_float_text(double value);
// How field.Error prints a bad value: null as "null", strings quoted, numbers and booleans
// plain, objects and arrays as Go's %#v of map[string]interface{} / []interface{}.
std::string go_value_text(const nlohmann::json& value);

}  // namespace tessel::testing
