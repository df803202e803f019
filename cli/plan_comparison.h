// `tessel plan` in the low-communication mode: the same search run for synchronous data
// parallelism too, and both layouts priced under both modes, side by side (issue 15).
#pragma once

#include <string>

#include "cli/plan_options.h"
#include "placement/placement.h"

namespace tessel::cli {

// The comparison's text. `mode` is what load_plan_inputs(options) gave (the low-communication
// mode on), `planned` the placement its search chose and `priced_at` the mode's H and bits for
// it (chosen ones filled in: placement/data_parallel_choice.h), at which both layouts are priced in
// the mode; the synchronous search runs here with the same options (budget, seed, strategy), so it
// takes as long again. command names the command in the search's lines on stderr.
std::string data_parallel_comparison(const PlanOptions& options, const PlanInputs& mode,
                                     const placement::Placement& planned,
                                     const placement::DataParallelMode& priced_at,
                                     const char* command);

}  // namespace tessel::cli
