// The report a local run leaves in its output folder: report.md (the job, the placement, the
// measured against the predicted iteration time, throughput, the final loss against the
// unigram entropy of the data) and loss.svg (the loss curve).
#pragma once

#include <string>

#include "noderuntime/launcher/local_job.h"
#include "noderuntime/launcher/run_result.h"

namespace tessel::launcher {

// The loss at the end of the run: the mean over its last tenth of steps (1 to 10 steps).
double final_loss(const std::vector<StepSummary>& steps);

// Writes report.md and, when there are steps, loss.svg into result.output_dir. Throws
// std::runtime_error naming a file that cannot be written.
void write_report(const LocalJob& job, const LocalRunResult& result);

}  // namespace tessel::launcher
