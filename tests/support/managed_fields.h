// metadata.managedFields bookkeeping and server-side apply, as kube-apiserver v1.26 does them
// (structured-merge-diff field sets in the FieldsV1 form: "f:name", "k:{...}", "v:...").
//
// Order of a write in kube-apiserver, which the server core has to follow for the recorded
// fields to match a real server: decode + kind defaults (builtin_semantics'
// apply_decode_defaults, the CRD schema defaults) -> record_update / server_side_apply ->
// admission defaults (apply_admission_defaults) -> the subresource strategy (a /status write
// keeps only status) -> validation -> storage. Fields set after the field manager ran (e.g.
// serviceAccountName, tolerations of a Pod, status.phase) are owned by nobody, as on a real
// server.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/managed_fields_merge_types.h"

namespace tessel::testing {

struct ApplyResult {
  nlohmann::json object;
  // One line per conflicting field, worded as the one-conflict message of kube-apiserver:
  // `conflict with "tessel-operator" using tessel.dev/v1alpha1: .spec.replicas`. When not
  // empty, object is null and conflict_status is the 409 to answer.
  std::vector<std::string> conflicts;
  nlohmann::json conflict_status;  // the 409 Conflict Status body; null without conflicts
};

// live is null when the object does not exist yet. The returned object carries the
// updated metadata.managedFields. Conflicts only when !force. Throws std::invalid_argument
// (a 400 BadRequest whose message is what()) when the applied configuration carries
// metadata.managedFields or an apiVersion other than the live object's.
ApplyResult server_side_apply(const nlohmann::json& live, const nlohmann::json& applied,
                              const std::string& manager, bool force,
                              const std::string& subresource);
// The same with the list/map types of the object's kind (MergeTypes::for_crd_version for a
// custom resource whose CRD is known); the overload above uses MergeTypes::for_kind.
ApplyResult server_side_apply(const nlohmann::json& live, const nlohmann::json& applied,
                              const std::string& manager, bool force,
                              const std::string& subresource, const MergeTypes& types);

// Records a non-apply write (operation "Update") by `manager` in new_object's managedFields.
// old_object is null for a create. new_object is the object as the request made it (before
// the subresource strategy dropped what it ignores). managedFields in new_object replace the
// live ones when they are given and differ (`[]` clears them), except through a subresource.
void record_update(nlohmann::json& new_object, const nlohmann::json& old_object,
                   const std::string& manager, const std::string& subresource);
void record_update(nlohmann::json& new_object, const nlohmann::json& old_object,
                   const std::string& manager, const std::string& subresource,
                   const MergeTypes& types);

// The manager name the server derives from a User-Agent when fieldManager is not given
// ("kubectl-client-side-apply", "tessel", ...), as kube-apiserver does.
std::string default_manager(const std::string& user_agent);

// The 422 Invalid Status body of an apply patch without fieldManager, as kube-apiserver words
// it (`PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: ...`).
nlohmann::json missing_field_manager_status();

}  // namespace tessel::testing
