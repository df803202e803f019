// The low-communication mode's settings as a plan states them: H and the delta's bits, whether
// the planner chose them (placement/sync_period.h) and why, for `tessel plan` (table, JSON and
// YAML) and `tessel simulate`.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/plan_options.h"
#include "placement/sync_period.h"

namespace tessel::cli {

struct PlannedDataParallel {
  placement::DataParallelMode mode;  // H and bits as priced for the layout: chosen ones filled in
  std::optional<placement::SyncPeriodChoice> sync_every;  // when the planner chose H
  std::optional<placement::DeltaBitsChoice> delta_bits;   // when the planner chose the bits
};

// The mode of `in` (low-communication) as priced for a layout (pipelines[r][s] = device): the
// H the cost model chose for it, with the reason.
PlannedDataParallel planned_data_parallel(const PlanInputs& in,
                                          const std::vector<std::vector<int>>& pipelines);

// "low-communication H=50 8-bit" (" blocking" when the exchange is waited).
std::string mode_name(const placement::DataParallelMode& mode);

// Lines for people: the mode, then why each chosen value (or "given").
std::string planned_data_parallel_text(const PlannedDataParallel& planned);

// {"mode", "sync_every", "sync_every_chosen", "delta_bits", "delta_bits_chosen", "delayed", and
// when chosen "sync_overhead", "inner_step_s", "stall_per_sync_s", "sync_every_reason",
// "delta_bits_reason"}.
nlohmann::json planned_data_parallel_json(const PlannedDataParallel& planned);
// The same as a YAML section "data_parallel:" (scalars written as JSON writes them, valid YAML).
std::string planned_data_parallel_yaml(const PlannedDataParallel& planned);

}  // namespace tessel::cli
