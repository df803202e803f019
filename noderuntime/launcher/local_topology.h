// The network a local job runs on: the job's topology (a file, or generated), its links scaled
// by the job's factors, and every device replaced by what really computes here, a stage
// process of this machine (its measured speed, an equal share of the memory). The links are
// emulated between the processes exactly as this topology says, and the planner and the
// simulator predict with it, so `tessel simulate` on the report's topology.yaml reproduces the
// report's prediction.
#pragma once

#include "noderuntime/launcher/compute_speed.h"
#include "noderuntime/launcher/local_job.h"
#include "placement/topology.h"

namespace tessel::launcher {

// The job's topology before localisation: loaded (errors name the topology file) or
// generated, links scaled. Throws LocalJobError when its device count is not stages x replicas.
placement::Topology job_topology(const LocalJob& job);

// Every device becomes a "local-cpu" process computing at speed.effective_flops_per_s() (as
// the full cost model's utilisation x peak) with this machine's memory shared by the job's
// processes. Sites and links stay.
placement::Topology localize_topology(placement::Topology topology, const ComputeSpeed& speed,
                                      int processes);

}  // namespace tessel::launcher
