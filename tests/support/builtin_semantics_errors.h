// The pieces kube-apiserver's validation is written with: field errors worded as
// k8s.io/apimachinery's field.Error words them ("Invalid value: \"x\": detail"), and its
// validators of names, labels, qualified names and keys with their messages.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/structural_schema.h"

namespace tessel::testing::validation {

// A value as Go's %v / %q / %#v prints it in field errors: strings quoted, numbers and
// booleans bare, lists of strings as []string{"a", "b"}, null as null.
std::string go_value(const nlohmann::json& value);

FieldError required(const std::string& field, const std::string& detail = "");
FieldError forbidden(const std::string& field, const std::string& detail);
FieldError invalid(const std::string& field, const nlohmann::json& value,
                   const std::string& detail);
FieldError not_supported(const std::string& field, const nlohmann::json& value,
                         const std::vector<std::string>& supported);
FieldError duplicate(const std::string& field, const nlohmann::json& value);
FieldError not_found(const std::string& field, const nlohmann::json& value);
FieldError too_long(const std::string& field, std::size_t max_bytes);

// Messages of apimachinery's validators; empty when the value is valid.
std::vector<std::string> dns1123_subdomain(const std::string& value);
std::vector<std::string> dns1123_label(const std::string& value);
std::vector<std::string> dns1035_label(const std::string& value);
std::vector<std::string> qualified_name(const std::string& value);
std::vector<std::string> label_value(const std::string& value);
std::vector<std::string> config_map_key(const std::string& value);
std::vector<std::string> env_var_name(const std::string& value);
std::vector<std::string> port_name(const std::string& value);  // IANA_SVC_NAME
// Object names: the rule applied to a name, or to a generateName (prefix = true, a trailing
// '-' allowed).
std::vector<std::string> name_is_dns1123_subdomain(const std::string& name, bool prefix);
std::vector<std::string> name_is_dns1123_label(const std::string& name, bool prefix);
std::vector<std::string> name_is_dns1035_label(const std::string& name, bool prefix);
std::vector<std::string> path_segment_name(const std::string& name, bool prefix);

// "spec.containers[0].name" and "data[key]".
std::string index(const std::string& field, std::size_t i);
std::string key(const std::string& field, const std::string& key);

void append(std::vector<FieldError>& to, const std::vector<FieldError>& more);

}  // namespace tessel::testing::validation
