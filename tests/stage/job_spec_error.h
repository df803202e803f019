// The error parse_job_spec gives for a job.json document, for tests of its refusals.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "noderuntime/stage/job_spec.h"

namespace tessel::stage {

// What() of the ConfigError, or "" when the document parses.
inline std::string error_of(const nlohmann::json& job) {
  try {
    parse_job_spec(job.dump(), "job.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace tessel::stage
