// The metadata rules the API test server applies to stored objects: a terminating object
// (metadata.deletionTimestamp), its finalizers, its annotations and the metav1.Time wire form.
// The server's own, so that it does not share kube/'s client helpers with the code it checks.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::testing {

// metadata.deletionTimestamp is set: the object waits for its finalizers (or its grace period).
bool is_terminating(const nlohmann::json& object);

// metadata.finalizers, in order; none when absent or null.
std::vector<std::string> finalizers_of(const nlohmann::json& object);
bool has_finalizer(const nlohmann::json& object, std::string_view finalizer);
// Appends it unless present; true when it was added.
bool add_finalizer(nlohmann::json& object, const std::string& finalizer);
// Removes every occurrence, and metadata.finalizers with the last one; true when one was there.
bool remove_finalizer(nlohmann::json& object, const std::string& finalizer);

// metadata.annotations[key] when it is a string.
std::optional<std::string> annotation_of(const nlohmann::json& object, std::string_view key);
void set_annotation(nlohmann::json& object, const std::string& key, const std::string& value);

// "2026-11-21T23:01:17Z": metav1.Time on the wire (UTC, whole seconds).
std::string rfc3339(std::chrono::system_clock::time_point time);

}  // namespace tessel::testing
