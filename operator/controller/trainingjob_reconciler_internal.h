// Helpers the TrainingJob reconciler's files share (trainingjob_*.cpp): how its status fields
// read, and small text and lookup functions. Not an interface of the controller library.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/trainingjob.h"
#include "kube/resource.h"
#include "operator/controller/candidate_nodes.h"
#include "operator/controller/gang.h"

namespace tessel::controller::trainingjob {

// The core (group "") resource of `kind`: "Pod", "Secret", "ConfigMap".
const kube::ResourceInfo& resource(const std::string& kind);

// An RFC 3339 time with whole seconds ("2026-11-26T05:00:00Z"); nullopt when malformed.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(const std::string& text);

// The first `limit` items joined by `separator`, then "and N more".
std::string join(const std::vector<std::string>& items, const std::string& separator,
                 size_t limit = 8);

// status.restarts and status.resizes; 0 when unset.
int64_t restarts_of(const nlohmann::json& status);
int64_t resizes_of(const nlohmann::json& status);

// The start attempt the current pods carry (kAttemptAnnotation): every restart and every resize
// starts a new one, so that pods of the last are told from the next's.
int64_t attempt_of(const nlohmann::json& status);

// The data-parallel width the job is placed at: status.replicas when it is one the spec allows,
// else the spec's.
int width_of(const nlohmann::json& status, const api::TrainingJob& job);

// The job as one of `width` data-parallel replicas runs it: the same global batch, more
// micro-batches per replica.
api::TrainingJob at_width(const api::TrainingJob& job, int width);

// status.excludedNodes: at most this many (the CRD's maxItems), the oldest dropped first; each
// for this long, after which a healed node is used again.
inline constexpr size_t kMaxExcludedNodes = 32;
inline constexpr std::chrono::minutes kExcludedNodeTtl{30};

// status.excludedNodes without the entries expired at `now`.
nlohmann::json live_exclusions(const nlohmann::json& status,
                               std::chrono::system_clock::time_point now);

// The nodes an exclusions list names.
std::set<NodeRef> excluded_set(const nlohmann::json& exclusions);

// The free GPUs of `nodes` together.
int free_gpus(const std::vector<GpuNode>& nodes);

// status.phase; "" when unset.
std::string phase_of(const nlohmann::json& status);

}  // namespace tessel::controller::trainingjob
