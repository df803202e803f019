// The pieces every api/ parser of a hand-written or hostile JSON document shares to read it, check
// names and write its FieldErrors: a bounded parse, unknown fields, a DNS subdomain name, a value
// shown without printing it whole, and how many errors one document lists.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/manifest_error.h"

namespace tessel::api {

// Errors listed for one document: a hostile one may have thousands of bad entries, and the
// message goes into an Event, a condition or a log line. The rest are counted, not listed.
inline constexpr size_t kMaxReportedFieldErrors = 20;

// A Kubernetes DNS-1123 subdomain (a Node's name, a MemberCluster's): 1 to 253 characters,
// labels of lowercase letters, digits and '-' that start and end with a letter or digit, joined
// by '.'.
bool is_dns_subdomain(const std::string& name);

// A text as an error message shows it: at most 80 bytes, then "... (N bytes)", not cut inside a
// UTF-8 character (JSON text must stay UTF-8; a hostile name may be 200 KiB long).
std::string shown_text(const std::string& text);

// What a JSON value is, for an error message, without printing a large or deeply nested one
// (dump() recurses into a value nested 100,000 deep, and prints all of a huge one): a number as
// placement::number_text writes it, a string quoted and shown_text'ed, a list of at most 4
// scalars item by item, a longer list or an object by its size, else its type name ("null").
std::string describe_json_value(const nlohmann::json& value);

// `text` parsed as a JSON object. Throws ManifestError for `source` naming `field` when it is
// longer than `max_bytes` (checked before parsing) or not a JSON object.
nlohmann::json parse_json_object(const std::string& text, size_t max_bytes,
                                 const std::string& field, const std::string& source);

// An "unknown field" error named "<at>.<key>" (the key shown_text'ed) for each key of `object`
// not in `known`, in the object's order.
void add_unknown_field_errors(const nlohmann::json& object,
                              std::initializer_list<std::string_view> known, const std::string& at,
                              std::vector<FieldError>& errors);

// A field of an object, or null: by reference, since copying a value nested 100,000 deep (as
// json::value() does) recurses as deep.
const nlohmann::json& field_of(const nlohmann::json& object, const char* key);

}  // namespace tessel::api
