// The links a placement rests on, for status.placement.links: each pair of distinct nodes that
// exchange data (consecutive stages of a pipeline, neighbours of a data-parallel ring), with the
// link the cost model used and where it came from (measured by the prober, a site aggregate, or
// estimated), so that `kubectl get trainingjob -o yaml` shows what the placement believed.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>

#include "operator/controller/job_placement.h"

namespace tessel::controller {

// At most this many links are listed, the slowest first (the ones that shape the iteration);
// status.placement.linksOmitted counts the rest.
inline constexpr size_t kMaxStatusLinks = 64;

// The links of `placed` for a job of `stages` x `replicas` (a pipeline whose last stage feeds
// its first again when the schedule is interleaved, i.e. when there are more virtual stages
// than stages): [{from, to, rttMs, gbps, source, carries}] sorted slowest first, then by name;
// from < to by name; carries is "pipeline", "data-parallel" or "pipeline,data-parallel".
// Returns the listed links and how many were left out.
std::pair<nlohmann::json, size_t> placement_links(const JobPlacement& placed, int stages,
                                                  int replicas);

}  // namespace tessel::controller
