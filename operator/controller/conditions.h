// metav1.Condition lists in a status, kept as Kubernetes API conventions ask: one entry per
// type; lastTransitionTime moves only when the status flips; reason is CamelCase; the
// observedGeneration says which spec the condition judged.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel::controller {

struct Condition {
  std::string type;    // "Valid", "Placed", "Ready", "Running", "Reachable"...
  std::string status;  // "True", "False" or "Unknown"
  std::string reason;  // CamelCase, e.g. "NotEnoughGPUs"
  std::string message;
};

// Sets `condition` in `conditions` (a JSON array, created when null). Returns true when
// anything changed (status, reason, message or generation), so that a reconcile that changes
// nothing writes nothing. `now` is an RFC 3339 time, used only when the status flips or the
// condition is new. Throws std::invalid_argument for a status other than True/False/Unknown or a
// reason that is not CamelCase (the CRD's schema would refuse the write).
bool set_condition(nlohmann::json& conditions, const Condition& condition, int64_t generation,
                   const std::string& now);

// The condition of `type`, or nullptr.
const nlohmann::json* find_condition(const nlohmann::json& conditions, const std::string& type);

// True when the condition of `type` has status True.
bool condition_is_true(const nlohmann::json& conditions, const std::string& type);

}  // namespace tessel::controller
