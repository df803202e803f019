// The labels tessel puts on every object it creates in a member cluster. Remote objects cannot
// carry ownerReferences to the hub's TrainingJob, so these say where they come from: the
// operator finds, counts and sweeps its objects by them.
#pragma once

namespace tessel::controller {

inline constexpr const char* kJobNameLabel = "tessel.dev/job";  // the TrainingJob's name
inline constexpr const char* kJobNamespaceLabel = "tessel.dev/job-namespace";
inline constexpr const char* kJobUidLabel = "tessel.dev/job-uid";  // its metadata.uid
inline constexpr const char* kHubLabel = "tessel.dev/hub";         // which hub made it
// On stage pods only: the tasklet the pod runs.
inline constexpr const char* kStageLabel = "tessel.dev/stage";
inline constexpr const char* kReplicaLabel = "tessel.dev/replica";
inline constexpr const char* kRankLabel = "tessel.dev/rank";
// An annotation on every remote object: the start attempt that made it (pods of an earlier,
// failed attempt are not counted for the current one).
inline constexpr const char* kAttemptAnnotation = "tessel.dev/attempt";

}  // namespace tessel::controller
