// Internal to builtin_semantics: what each built-in kind does, one table entry per kind.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/api_builtin_resources.h"
#include "tests/support/structural_schema.h"

namespace tessel::testing {

using NameRule = std::vector<std::string> (*)(const std::string& name, bool prefix);

struct KindRules {
  NameRule name_rule;
  void (*decode_defaults)(nlohmann::json& object);
  void (*admission_defaults)(nlohmann::json& object);
  // The kind's own validation, without the metadata checks (below).
  std::vector<FieldError> (*validate_create)(const nlohmann::json& object);
  std::vector<FieldError> (*validate_update)(const nlohmann::json& old_object,
                                             const nlohmann::json& new_object);
  // Whether the kind's validation checks metadata itself on create (core/v1 Events do not) and
  // again on update (its strategy calling ValidateObjectMetaUpdate).
  bool validates_metadata_on_create = true;
  bool validates_metadata_on_update = true;
};

// nullptr for kinds without built-in rules (custom resources).
const KindRules* kind_rules(const ApiResource& info);

// The kinds' tables, one per file.
KindRules pod_rules();
KindRules node_rules();
KindRules namespace_rules();
KindRules service_rules();
KindRules config_map_rules();
KindRules secret_rules();
KindRules service_account_rules();
KindRules core_event_rules();
KindRules events_v1_event_rules();
KindRules lease_rules();
KindRules role_rules();  // builtin_semantics_rbac.cpp
KindRules cluster_role_rules();
KindRules role_binding_rules();
KindRules cluster_role_binding_rules();
KindRules deployment_rules();  // builtin_semantics_apps.cpp
KindRules daemon_set_rules();
KindRules pod_disruption_budget_rules();
KindRules validating_admission_policy_rules();  // builtin_semantics_admission_policy.cpp
KindRules validating_admission_policy_binding_rules();

// Adds the zero-valued fields the kind's Go type always serialises (from MergeTypes' zero
// object) where the object lacks them.
void fill_zero_fields(const ApiResource& info, nlohmann::json& object);

// Shared by several kinds: no validation beyond metadata.
std::vector<FieldError> no_errors(const nlohmann::json& object);
std::vector<FieldError> no_update_errors(const nlohmann::json& old_object,
                                         const nlohmann::json& new_object);
void no_defaults(nlohmann::json& object);

// Go's time.Time String() of an RFC 3339 timestamp ("2026-11-21 23:01:17 +0000 UTC"), as
// kube-apiserver prints times in field errors.
std::string go_time_string(const std::string& rfc3339);

}  // namespace tessel::testing
