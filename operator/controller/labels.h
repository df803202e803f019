// The labels tessel puts on every object it creates in a member cluster. Remote objects cannot
// carry ownerReferences to the hub's TrainingJob, so these say where they come from: the
// operator finds, counts and sweeps its objects by them.
#pragma once

namespace tessel::controller {

inline constexpr const char* kJobNameLabel = "tessel.dev/job";  // the TrainingJob's name
inline constexpr const char* kJobNamespaceLabel = "tessel.dev/job-namespace";
inline constexpr const char* kJobUidLabel = "tessel.dev/job-uid";  // its metadata.uid
inline constexpr const char* kHubLabel = "tessel.dev/hub";         // which hub made it

}  // namespace tessel::controller
