// Helpers over Kubernetes objects kept as nlohmann::json: metadata, labels and annotations,
// ownerReferences, finalizers and status conditions (label and field selectors: the two
// headers included below).
//
// The JSON stays the representation (an informer caches exactly what the server sent); these
// functions read and edit it in place following the API conventions. Readers are lenient: a
// missing or null field reads as empty (string ""), 0 or an empty collection.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/field_selector.h"
#include "kube/label_selector.h"

namespace tessel::kube {

// --- metadata -------------------------------------------------------------------------------

std::string object_name(const nlohmann::json& obj);
std::string object_namespace(const nlohmann::json& obj);  // "" for cluster-scoped objects
std::string object_uid(const nlohmann::json& obj);
std::string object_resource_version(const nlohmann::json& obj);
std::int64_t object_generation(const nlohmann::json& obj);
// "namespace/name", or "name" for cluster-scoped objects (the informer cache key).
std::string object_key(const nlohmann::json& obj);
// metadata.deletionTimestamp is set: the object is terminating, waiting for its finalizers.
bool is_being_deleted(const nlohmann::json& obj);

// --- labels and annotations -----------------------------------------------------------------

std::map<std::string, std::string> object_labels(const nlohmann::json& obj);
std::optional<std::string> get_label(const nlohmann::json& obj, std::string_view key);
void set_label(nlohmann::json& obj, const std::string& key, const std::string& value);
bool remove_label(nlohmann::json& obj, const std::string& key);  // true if it was there

std::map<std::string, std::string> object_annotations(const nlohmann::json& obj);
std::optional<std::string> get_annotation(const nlohmann::json& obj, std::string_view key);
void set_annotation(nlohmann::json& obj, const std::string& key, const std::string& value);
bool remove_annotation(nlohmann::json& obj, const std::string& key);

// JSON merge patch (application/merge-patch+json) setting one annotation, or removing it
// when value is nullopt: {"metadata":{"annotations":{key: value | null}}}.
nlohmann::json annotation_merge_patch(const std::string& key,
                                      const std::optional<std::string>& value);

// --- ownerReferences ------------------------------------------------------------------------

// The ownerReference that makes `owner` the controller of another object: apiVersion, kind,
// name, uid from the owner, controller true. blockOwnerDeletion is left unset: it only makes a
// foreground deletion of the owner wait for the object, and where the
// OwnerReferencesPermissionEnforcement admission plugin is on, setting it needs update on the
// owner's finalizers subresource, a right tessel's controllers do not otherwise need.
nlohmann::json controller_reference(const nlohmann::json& owner);
// Adds (or refreshes) owner as obj's controller; returns whether obj changed. Throws
// std::invalid_argument when obj already has a different controller, or when the owner is
// namespaced and obj lives elsewhere (garbage collection would ignore such a reference).
bool set_controller_reference(nlohmann::json& obj, const nlohmann::json& owner);
// The ownerReference with controller: true, if any.
std::optional<nlohmann::json> controller_owner(const nlohmann::json& obj);

// --- finalizers -----------------------------------------------------------------------------

std::vector<std::string> object_finalizers(const nlohmann::json& obj);
bool has_finalizer(const nlohmann::json& obj, std::string_view finalizer);
bool add_finalizer(nlohmann::json& obj, const std::string& finalizer);     // true if added
bool remove_finalizer(nlohmann::json& obj, const std::string& finalizer);  // true if removed

// --- status.conditions ----------------------------------------------------------------------

struct Condition {
  std::string type;
  std::string status;  // "True", "False" or "Unknown"
  std::string reason;  // CamelCase, machine-readable
  std::string message;
  std::string last_transition_time;      // RFC 3339, UTC, seconds
  std::int64_t observed_generation = 0;  // 0: not recorded
};

std::optional<Condition> find_condition(const nlohmann::json& obj, std::string_view type);
bool is_condition_true(const nlohmann::json& obj, std::string_view type);
// Inserts or updates the condition of that type in status.conditions. lastTransitionTime is
// set to `now` only when the condition is new or its status changes (condition's own
// last_transition_time is ignored). Returns whether the object changed, so a reconciler
// writes status only when needed. Throws std::invalid_argument for an empty type or a status
// other than True/False/Unknown.
bool set_condition(nlohmann::json& obj, const Condition& condition,
                   std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

// "2026-11-21T23:01:17Z": the metav1.Time wire form (UTC, whole seconds).
std::string format_rfc3339(std::chrono::system_clock::time_point time);

}  // namespace tessel::kube
