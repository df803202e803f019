#include "tests/support/api_object_meta.h"

#include <algorithm>
#include <ctime>

namespace tessel::testing {
namespace {

using json = nlohmann::json;

// metadata.<field>, or null when the object or its metadata is not a JSON object.
const json& metadata_field(const json& object, const char* field) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return kNull;
  const auto found = metadata->find(field);
  return found == metadata->end() ? kNull : *found;
}

json& metadata_of(json& object) {
  json& metadata = object["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  return metadata;
}

}  // namespace

bool is_terminating(const json& object) {
  const json& stamp = metadata_field(object, "deletionTimestamp");
  return stamp.is_string() && !stamp.get<std::string>().empty();
}

std::vector<std::string> finalizers_of(const json& object) {
  std::vector<std::string> out;
  const json& finalizers = metadata_field(object, "finalizers");
  if (!finalizers.is_array()) return out;
  for (const json& finalizer : finalizers) {
    if (finalizer.is_string()) out.push_back(finalizer.get<std::string>());
  }
  return out;
}

bool has_finalizer(const json& object, std::string_view finalizer) {
  const std::vector<std::string> finalizers = finalizers_of(object);
  return std::find(finalizers.begin(), finalizers.end(), finalizer) != finalizers.end();
}

bool add_finalizer(json& object, const std::string& finalizer) {
  if (has_finalizer(object, finalizer)) return false;
  json& finalizers = metadata_of(object)["finalizers"];
  if (!finalizers.is_array()) finalizers = json::array();
  finalizers.push_back(finalizer);
  return true;
}

bool remove_finalizer(json& object, const std::string& finalizer) {
  if (!has_finalizer(object, finalizer)) return false;
  json& metadata = metadata_of(object);
  json kept = json::array();
  for (const json& entry : metadata["finalizers"]) {
    if (entry != finalizer) kept.push_back(entry);
  }
  if (kept.empty()) {
    metadata.erase("finalizers");
  } else {
    metadata["finalizers"] = std::move(kept);
  }
  return true;
}

std::optional<std::string> annotation_of(const json& object, std::string_view key) {
  const json& annotations = metadata_field(object, "annotations");
  if (!annotations.is_object()) return std::nullopt;
  const auto found = annotations.find(std::string(key));
  if (found == annotations.end() || !found->is_string()) return std::nullopt;
  return found->get<std::string>();
}

void set_annotation(json& object, const std::string& key, const std::string& value) {
  json& annotations = metadata_of(object)["annotations"];
  if (!annotations.is_object()) annotations = json::object();
  annotations[key] = value;
}

std::string rfc3339(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace tessel::testing
