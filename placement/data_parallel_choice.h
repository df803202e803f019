// The low-communication mode's H and delta bits as a placement resolves them: given (the
// workload's data_parallel), or chosen by the planner for that placement (sync_period.h), and why.
// `tessel plan` and `tessel simulate` (cli/plan_data_parallel.h prints it), `tessel local`
// (noderuntime/launcher/local_plan.h) and the operator (operator/controller/job_placement.h) all
// resolve the mode here, so they say the same H for the same layout, and job.json always carries
// numbers.
#pragma once

#include <optional>
#include <string>

#include "placement/data_parallel_mode.h"
#include "placement/pipeline_timing.h"
#include "placement/sync_period.h"

namespace tessel::placement {

struct DataParallelChoice {
  // H and bits as run (choose_sync_every and choose_delta_bits false); synchronous: as given.
  DataParallelMode mode;
  std::optional<SyncPeriodChoice> sync_every;  // when the planner chose H now
  std::optional<DeltaBitsChoice> delta_bits;   // when the planner chose the bits
  // Why H and the bits are what they are, for people: "H=50: given (spec.dataParallel.syncEvery)"
  // or the planner's reason. A caller that keeps an earlier choice passes it as given and replaces
  // the reason.
  std::string sync_every_reason;
  std::string delta_bits_reason;
  // The caller passed an earlier choice of the planner as given, to keep it (a checkpoint was
  // trained at it), and replaced sync_every_reason.
  bool sync_every_kept = false;

  bool low_communication() const { return mode.low_communication(); }
};

// `mode` (a workload's data_parallel) resolved for one placement: `spec` is the cost model's
// schedule (FullCostModel::schedule()) and `timing` its pipeline_timing of that placement.
// When mode.choose_sync_every, H is choose_sync_every(spec, timing, mode.sync_overhead): the
// same H the cost model priced the placement at. When mode.choose_delta_bits, choose_delta_bits().
// The field names say where given values come from ("spec.dataParallel.syncEvery"); empty, the
// reason says just "given".
DataParallelChoice choose_data_parallel(const DataParallelMode& mode, const ScheduleSpec& spec,
                                        const PipelineTiming& timing,
                                        const std::string& sync_every_field = "",
                                        const std::string& delta_bits_field = "");

// "low-communication H=50 8-bit" (" blocking" when the exchange is waited); "synchronous".
std::string data_parallel_name(const DataParallelMode& mode);

}  // namespace tessel::placement
