// `kubectl tessel top JOB`: how a TrainingJob trains now (status.progress): the job's step,
// loss, tokens/s and ETA, then per pipeline stage its slowest replica's latest step time,
// bubble and network wait (status.progress.stages).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel::kubectl_tessel {

// The data both outputs show: job, phase, step, totalSteps, loss, tokensPerSecond, eta,
// lastCheckpointStep, updatedAt (those the status has), stages [{stage, replica, step,
// stepSeconds, bubble, networkWaitSeconds}]. Throws PluginError naming the job when it has no
// progress yet (saying its phase), or naming the field that is malformed.
nlohmann::json top_view(const nlohmann::json& job);

std::string render_top(const nlohmann::json& view, int width = 80);

}  // namespace tessel::kubectl_tessel
