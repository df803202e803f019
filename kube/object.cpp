#include "kube/object.h"

#include <algorithm>
#include <ctime>
#include <stdexcept>

namespace tessel::kube {
namespace {

using nlohmann::json;

const json& null_json() {
  static const json kNull;
  return kNull;
}

// obj[a][b]..., or null when any step is missing or not an object.
const json& lookup(const json& obj, std::initializer_list<std::string_view> path) {
  const json* node = &obj;
  for (std::string_view step : path) {
    if (!node->is_object()) return null_json();
    auto it = node->find(step);
    if (it == node->end()) return null_json();
    node = &*it;
  }
  return *node;
}

std::string string_at(const json& obj, std::initializer_list<std::string_view> path) {
  const json& value = lookup(obj, path);
  return value.is_string() ? value.get<std::string>() : std::string();
}

// obj.metadata.<field> as an object, created (replacing null) when absent.
json& metadata_object(json& obj, const char* field) {
  json& metadata = obj["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  json& map = metadata[field];
  if (!map.is_object()) map = json::object();
  return map;
}

std::map<std::string, std::string> string_map_at(const json& obj, const char* field) {
  std::map<std::string, std::string> result;
  const json& map = lookup(obj, {"metadata", field});
  if (!map.is_object()) return result;
  for (const auto& [key, value] : map.items()) {
    if (value.is_string()) result.emplace(key, value.get<std::string>());
  }
  return result;
}

std::optional<std::string> string_map_get(const json& obj, const char* field,
                                          std::string_view key) {
  const json& value = lookup(obj, {"metadata", field, key});
  if (!value.is_string()) return std::nullopt;
  return value.get<std::string>();
}

bool string_map_remove(json& obj, const char* field, const std::string& key) {
  if (!lookup(obj, {"metadata", field}).is_object()) return false;
  return obj["metadata"][field].erase(key) > 0;
}

}  // namespace

// --- metadata -------------------------------------------------------------------------------

std::string object_name(const json& obj) { return string_at(obj, {"metadata", "name"}); }

std::string object_namespace(const json& obj) { return string_at(obj, {"metadata", "namespace"}); }

std::string object_uid(const json& obj) { return string_at(obj, {"metadata", "uid"}); }

std::string object_resource_version(const json& obj) {
  return string_at(obj, {"metadata", "resourceVersion"});
}

std::int64_t object_generation(const json& obj) {
  const json& value = lookup(obj, {"metadata", "generation"});
  return value.is_number_integer() ? value.get<std::int64_t>() : 0;
}

std::string object_key(const json& obj) {
  std::string ns = object_namespace(obj);
  return ns.empty() ? object_name(obj) : ns + "/" + object_name(obj);
}

bool is_being_deleted(const json& obj) {
  const json& value = lookup(obj, {"metadata", "deletionTimestamp"});
  return value.is_string() && !value.get<std::string>().empty();
}

// --- labels and annotations -----------------------------------------------------------------

std::map<std::string, std::string> object_labels(const json& obj) {
  return string_map_at(obj, "labels");
}

std::optional<std::string> get_label(const json& obj, std::string_view key) {
  return string_map_get(obj, "labels", key);
}

void set_label(json& obj, const std::string& key, const std::string& value) {
  metadata_object(obj, "labels")[key] = value;
}

bool remove_label(json& obj, const std::string& key) {
  return string_map_remove(obj, "labels", key);
}

std::map<std::string, std::string> object_annotations(const json& obj) {
  return string_map_at(obj, "annotations");
}

std::optional<std::string> get_annotation(const json& obj, std::string_view key) {
  return string_map_get(obj, "annotations", key);
}

void set_annotation(json& obj, const std::string& key, const std::string& value) {
  metadata_object(obj, "annotations")[key] = value;
}

bool remove_annotation(json& obj, const std::string& key) {
  return string_map_remove(obj, "annotations", key);
}

json annotation_merge_patch(const std::string& key, const std::optional<std::string>& value) {
  json patch;
  patch["metadata"]["annotations"][key] = value ? json(*value) : json(nullptr);
  return patch;
}

// --- ownerReferences ------------------------------------------------------------------------

json controller_reference(const json& owner) {
  return json{{"apiVersion", string_at(owner, {"apiVersion"})},
              {"kind", string_at(owner, {"kind"})},
              {"name", object_name(owner)},
              {"uid", object_uid(owner)},
              {"controller", true}};
}

bool set_controller_reference(json& obj, const json& owner) {
  const std::string owner_ns = object_namespace(owner);
  if (!owner_ns.empty() && owner_ns != object_namespace(obj)) {
    throw std::invalid_argument("owner " + object_key(owner) +
                                " is namespaced and cannot own an object outside namespace " +
                                owner_ns);
  }
  if (object_uid(owner).empty()) {
    throw std::invalid_argument("owner " + object_key(owner) + " has no uid yet");
  }
  json reference = controller_reference(owner);
  if (auto current = controller_owner(obj);
      current && current->value("uid", "") != reference["uid"]) {
    throw std::invalid_argument("object " + object_key(obj) + " is already controlled by " +
                                current->value("kind", "") + " " + current->value("name", ""));
  }
  json& metadata = obj["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  json& references = metadata["ownerReferences"];
  if (!references.is_array()) references = json::array();
  for (json& existing : references) {
    if (existing.value("uid", "") == reference["uid"]) {
      if (existing == reference) return false;
      existing = reference;
      return true;
    }
  }
  references.push_back(std::move(reference));
  return true;
}

std::optional<json> controller_owner(const json& obj) {
  const json& references = lookup(obj, {"metadata", "ownerReferences"});
  if (!references.is_array()) return std::nullopt;
  for (const json& reference : references) {
    if (reference.is_object() && reference.value("controller", false)) return reference;
  }
  return std::nullopt;
}

// --- finalizers -----------------------------------------------------------------------------

std::vector<std::string> object_finalizers(const json& obj) {
  std::vector<std::string> result;
  const json& finalizers = lookup(obj, {"metadata", "finalizers"});
  if (!finalizers.is_array()) return result;
  for (const json& finalizer : finalizers) {
    if (finalizer.is_string()) result.push_back(finalizer.get<std::string>());
  }
  return result;
}

bool has_finalizer(const json& obj, std::string_view finalizer) {
  const std::vector<std::string> finalizers = object_finalizers(obj);
  return std::find(finalizers.begin(), finalizers.end(), finalizer) != finalizers.end();
}

bool add_finalizer(json& obj, const std::string& finalizer) {
  if (has_finalizer(obj, finalizer)) return false;
  json& metadata = obj["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  json& finalizers = metadata["finalizers"];
  if (!finalizers.is_array()) finalizers = json::array();
  finalizers.push_back(finalizer);
  return true;
}

bool remove_finalizer(json& obj, const std::string& finalizer) {
  if (!has_finalizer(obj, finalizer)) return false;
  json& finalizers = obj["metadata"]["finalizers"];
  json kept = json::array();
  for (json& entry : finalizers) {
    if (entry != finalizer) kept.push_back(std::move(entry));
  }
  // An empty list and an absent one mean the same to the server; drop the key.
  if (kept.empty()) {
    obj["metadata"].erase("finalizers");
  } else {
    finalizers = std::move(kept);
  }
  return true;
}

// --- status.conditions ----------------------------------------------------------------------

std::optional<Condition> find_condition(const json& obj, std::string_view type) {
  const json& conditions = lookup(obj, {"status", "conditions"});
  if (!conditions.is_array()) return std::nullopt;
  for (const json& entry : conditions) {
    if (!entry.is_object() || entry.value("type", "") != type) continue;
    Condition condition;
    condition.type = entry.value("type", "");
    condition.status = entry.value("status", "");
    condition.reason = entry.value("reason", "");
    condition.message = entry.value("message", "");
    condition.last_transition_time = entry.value("lastTransitionTime", "");
    condition.observed_generation = entry.value("observedGeneration", std::int64_t{0});
    return condition;
  }
  return std::nullopt;
}

bool is_condition_true(const json& obj, std::string_view type) {
  auto condition = find_condition(obj, type);
  return condition && condition->status == "True";
}

bool set_condition(json& obj, const Condition& condition,
                   std::chrono::system_clock::time_point now) {
  if (condition.type.empty()) throw std::invalid_argument("condition type is empty");
  if (condition.status != "True" && condition.status != "False" && condition.status != "Unknown") {
    throw std::invalid_argument("condition " + condition.type + " has status \"" +
                                condition.status + "\", want True, False or Unknown");
  }
  json& status = obj["status"];
  if (!status.is_object()) status = json::object();
  json& conditions = status["conditions"];
  if (!conditions.is_array()) conditions = json::array();

  auto existing = std::find_if(conditions.begin(), conditions.end(), [&](const json& entry) {
    return entry.is_object() && entry.value("type", "") == condition.type;
  });
  // Start from the stored entry so fields this struct does not model survive.
  json updated = existing != conditions.end() ? *existing : json::object();
  const bool transition = updated.value("status", "") != condition.status ||
                          updated.value("lastTransitionTime", "").empty();
  updated["type"] = condition.type;
  updated["status"] = condition.status;
  updated["reason"] = condition.reason;
  updated["message"] = condition.message;
  if (transition) updated["lastTransitionTime"] = format_rfc3339(now);
  if (condition.observed_generation > 0) {
    updated["observedGeneration"] = condition.observed_generation;
  } else {
    updated.erase("observedGeneration");
  }

  if (existing == conditions.end()) {
    conditions.push_back(std::move(updated));
    return true;
  }
  if (*existing == updated) return false;
  *existing = std::move(updated);
  return true;
}

std::string format_rfc3339(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace tessel::kube
