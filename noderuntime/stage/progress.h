// The progress lines tessel-stage prints on stdout: one JSON object per line, "event" first,
// then the rank's identity (rank, stage, replica), then the event's fields. A launcher reads
// them line by line; job_spec.h shows a step line.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "noderuntime/stage/stage_runtime.h"

namespace tessel::stage {

// {"event": event, "rank": r, "stage": s, "replica": d}
nlohmann::ordered_json progress_event(const char* event, int rank, int stage, int replica);

// The step line: step, loss, grad_norm, tokens, tokens_per_s, step_s, compute_s,
// bubble_fraction, network_wait_s.
nlohmann::ordered_json step_event(const StepReport& report, int rank, int stage, int replica);

// Writes the object as one line and flushes.
void print_progress(std::ostream& out, const nlohmann::ordered_json& event);

}  // namespace tessel::stage
