// The report a local run leaves in its output folder: report.md (the job, the placement, the
// measured against the predicted iteration time, throughput, the final loss against the
// unigram entropy of the data) and loss.svg (the loss curve).
#pragma once

#include <string>

#include "noderuntime/launcher/local_job.h"
#include "noderuntime/launcher/run_result.h"

namespace tessel::launcher {

// The loss at the end of the run: the mean over its last tenth of steps (1 to 10 steps).
double final_loss(const std::vector<progress::StepMetrics>& steps);

// What the run did, for the report's status line and the launcher's last line: "3 of 3 steps
// in 4.2 s"; resumed: "32 steps run (29 to 60 of 60), resumed from step 28, in 12.3 s", or
// "0 steps run (32 left of 60 after the checkpoint of step 28) in 1.2 s".
std::string steps_done_text(const LocalJob& job, const LocalRunResult& result);

// Writes report.md and, when there are steps, loss.svg into result.output_dir. Throws
// std::runtime_error naming a file that cannot be written.
void write_report(const LocalJob& job, const LocalRunResult& result);

}  // namespace tessel::launcher
