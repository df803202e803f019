// The low-communication mode as a plan resolved it (placement/data_parallel_choice.h): H and the
// delta's bits, whether the planner chose them and why, as `tessel plan` (table, JSON and YAML)
// and `tessel simulate` print it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "placement/data_parallel_choice.h"

namespace tessel::cli {

// Lines for people: the mode, then why each chosen value (or "given").
std::string planned_data_parallel_text(const placement::DataParallelChoice& planned);

// {"mode", "sync_every", "sync_every_chosen", "delta_bits", "delta_bits_chosen", "delayed", and
// when chosen "sync_overhead", "inner_step_s", "stall_per_sync_s", "sync_every_reason",
// "delta_bits_reason"}.
nlohmann::json planned_data_parallel_json(const placement::DataParallelChoice& planned);
// The same as a YAML section "data_parallel:" (scalars written as JSON writes them, valid YAML).
std::string planned_data_parallel_yaml(const placement::DataParallelChoice& planned);

}  // namespace tessel::cli
