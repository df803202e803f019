// The structured-merge-diff operations on JSON objects that managedFields and server-side
// apply are made of: the field set of an applied configuration, the comparison of two
// versions of an object, the merge of a configuration into a live object, and the removal of
// fields.
#pragma once

#include <nlohmann/json.hpp>

#include "tests/support/managed_fields_merge_types.h"
#include "tests/support/managed_fields_set.h"

namespace tessel::testing {

// The fields an applied configuration sets: its leaves, atomic lists and maps, and the
// elements of set and keyed lists (not the maps and structs on the way).
FieldSet fields_of(const nlohmann::json& object, const MergeTypes& types);

struct Comparison {
  FieldSet added;     // in the new object only (maps and lists on the way included)
  FieldSet modified;  // leaves whose value changed
  FieldSet removed;   // in the old object only
};
Comparison compare_objects(const nlohmann::json& old_object, const nlohmann::json& new_object,
                           const MergeTypes& types);

// live with config merged in: maps and structs field by field, set and keyed lists element by
// element (config's order wins for shared elements), atomic values replaced.
nlohmann::json merge_objects(const nlohmann::json& live, const nlohmann::json& config,
                             const MergeTypes& types);

// Removes every member of `fields` (with what lies below it) from object. A map or list left
// empty by the removal is removed too.
void remove_fields(nlohmann::json& object, const FieldSet& fields, const MergeTypes& types);

}  // namespace tessel::testing
