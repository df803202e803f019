// `kubectl tessel placement JOB`: where a TrainingJob's tasklets run (status.placement): the
// stage x replica grid (cluster, node and GPU of each cell, the layers of each stage), then the
// links between consecutive stages and between data-parallel neighbours that the placement
// rests on (status.placement.links: round trip, Gbit/s, where the figure came from).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel::kubectl_tessel {

// The data both outputs show (-o json|yaml print it): job, phase, clusters,
// predictedIterationSeconds, stages [{stage, layers, replicas [{replica, cluster, node, gpu}]}],
// links [{from, to, rttMs, gbps, source, carries, between}], linksOmitted. `between` names
// which stages a link joins ("s0>1" for a pipeline hop between stages 0 and 1, "dp s2" for
// data-parallel neighbours in stage 2, "s0>1 dp s0,1" when several). Throws PluginError naming the
// job and the field when the job has no placement yet (saying its phase and why) or a field is
// malformed.
nlohmann::json placement_view(const nlohmann::json& job);

// The view as text for a terminal `width` columns wide: replicas wrap into blocks of columns,
// long names are abbreviated in the middle.
std::string render_placement(const nlohmann::json& view, int width = 80);

}  // namespace tessel::kubectl_tessel
