// Reading a TrainingJob's status for the views: its "namespace/name", and the fields, each
// checked for its type so that a malformed object is named in the error, never misdrawn.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cli/kubectl_tessel/plugin_error.h"

namespace tessel::kubectl_tessel {

inline std::string job_name(const nlohmann::json& job) {
  const nlohmann::json metadata = job.value("metadata", nlohmann::json::object());
  return metadata.value("namespace", std::string()) + "/" + metadata.value("name", std::string());
}

// The member `key` of `object` (at `path`, for the error), of type `type` ("object", "array",
// "string", "number", "integer"); nullptr when absent. Throws PluginError when it has another.
inline const nlohmann::json* field(const nlohmann::json& object, const std::string& key,
                                   const char* type, const std::string& job,
                                   const std::string& path) {
  if (!object.is_object() || !object.contains(key)) return nullptr;
  const nlohmann::json& value = object.at(key);
  const std::string t = type;
  const bool ok = (t == "object" && value.is_object()) || (t == "array" && value.is_array()) ||
                  (t == "string" && value.is_string()) || (t == "number" && value.is_number()) ||
                  (t == "integer" && value.is_number_integer());
  if (!ok) {
    throw PluginError("TrainingJob " + job + ": " + path + "." + key + " is " + value.dump() +
                      ", not " + (t == "integer" || t == "array" || t == "object" ? "an " : "a ") +
                      t);
  }
  return &value;
}

// The job's status.phase, "" when none.
inline std::string job_phase(const nlohmann::json& job) {
  const nlohmann::json status = job.value("status", nlohmann::json::object());
  if (!status.is_object() || !status.contains("phase") || !status["phase"].is_string()) return "";
  return status["phase"].get<std::string>();
}

// The message of the job's condition `type`, "" when it has none.
inline std::string condition_message(const nlohmann::json& job, const std::string& type) {
  const nlohmann::json status = job.value("status", nlohmann::json::object());
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) {
    return "";
  }
  for (const nlohmann::json& c : status["conditions"]) {
    if (c.is_object() && c.value("type", "") == type && c.contains("message") &&
        c["message"].is_string()) {
      return c["message"].get<std::string>();
    }
  }
  return "";
}

}  // namespace tessel::kubectl_tessel
