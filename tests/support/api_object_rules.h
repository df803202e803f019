// The rules every write of the Kubernetes API test server applies to an object, whatever the
// verb: identity and system fields, the apiVersion/kind a resource accepts, schema pruning,
// defaulting and validation (custom resources through their structural schema, built-in kinds
// through builtin_semantics), generation, finalizers and the no-op check.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/api_resources.h"
#include "tests/support/structural_schema.h"

namespace tessel::testing {

std::string now_rfc3339();
std::string new_uid();  // a random version 4 UUID
// metadata.generateName plus five random characters, as the server completes it.
std::string generated_name(const std::string& generate_name);

// The object as read through `type`'s version: custom resources are stored once for all
// their versions ("None" conversion) and carry the apiVersion they are read with.
nlohmann::json in_version(nlohmann::json object, const ResourceType& type);

// Throws ApiError 400 when the body is not an object of `type` (a wrong apiVersion or kind,
// a custom resource without kind, a field that does not decode such as a Lease MicroTime).
// Fills in a built-in object's missing apiVersion and kind as the server's decoder does.
void check_decodable(const ResourceType& type, nlohmann::json& body);

// What decoding a body does: for a custom resource, prunes unknown fields as fieldValidation
// says ("Strict": 400 listing them; "Warn" or "": one warning each; "Ignore") and applies the
// schema's defaults; for a built-in kind, its Go defaults (builtin_semantics).
void decode_defaults(const ResourceType& type, nlohmann::json& object,
                     const std::string& field_validation, std::vector<std::string>& warnings);

// Throws ApiError 422 listing every violation of the object (old_object: null on create),
// metadata included (an update adding finalizers to an object being deleted, changing its
// uid or name...).
void validate(const ResourceType& type, const nlohmann::json& object,
              const nlohmann::json& old_object);

// On update: the system fields the client may not change, taken from the stored object
// (uid when absent, creationTimestamp, deletionTimestamp and grace period, generation).
void keep_system_fields(const nlohmann::json& old_object, nlohmann::json& object);
// generation + 1 when anything but metadata (and status, when it is a subresource) changed.
void bump_generation(const ResourceType& type, const nlohmann::json& old_object,
                     nlohmann::json& object);
// True when an update leaves nothing to store: equal but for managedFields timestamps.
bool same_but_timestamps(const nlohmann::json& a, const nlohmann::json& b);
// The update removed the last finalizer of an object being deleted: it is deleted now.
bool should_delete_during_update(const nlohmann::json& old_object, const nlohmann::json& object);

std::string meta_string(const nlohmann::json& object, const std::string& field);

}  // namespace tessel::testing
