// Chrome-trace JSON (chrome://tracing, Perfetto) of a simulated iteration, in DT-FM's layout:
// one process per pipeline stage ("stage r") and one thread per stream, named "1. forward-recv",
// "2. forward-compute", ... "7. optimizer-comm" (the all-reduce), "8. optimizer-step".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "placement/simulator.h"

namespace tessel::placement {

// {"traceEvents": [...], "displayTimeUnit": "ms"}: metadata events naming every process and
// thread, then one complete ("ph": "X") event per TimedEvent with ts and dur in microseconds,
// pid = rank and tid = the stream's number (1..8).
nlohmann::json chrome_trace_json(const SimulationResult& result);

// Throws std::runtime_error naming `path` when the file cannot be written.
void write_chrome_trace(const SimulationResult& result, const std::string& path);

}  // namespace tessel::placement
