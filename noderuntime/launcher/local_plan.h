// Where every stage process of a local job sits in the emulated network, and what the planner
// predicts for it: the placement (searched with the job's strategy, or read from a
// `tessel plan --format json` file), the layer split, and one iteration simulated event by
// event (the same computation as `tessel simulate` on the plan's topology and placement).
//
// The processes share this machine's cores, but not all of them compute at once: a process
// waiting for the network leaves its core to the others. So each process's share of the cores
// is refined for the placement: with share s, the simulated iteration says how many processes
// compute at each moment (the replicas run in step); the share becomes the mean, over the
// compute, of cores / (threads of the processes computing then) (at most 1), until it settles.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "noderuntime/launcher/compute_speed.h"
#include "noderuntime/launcher/local_job.h"
#include "placement/data_parallel_choice.h"
#include "placement/placement.h"
#include "placement/simulator.h"
#include "placement/topology.h"

namespace tessel::launcher {

struct LocalPlan {
  ComputeSpeed speed;            // the measured speed, share refined for this placement
  placement::Topology topology;  // the job's network localized with that speed
  placement::Placement placement;
  std::vector<int> stage_layers;  // per stage, the cost model's split
  std::vector<int> layer_split;   // per virtual stage (c P + p), what the stage runtime gets
  placement::ScheduleSpec spec;
  placement::PipelineTiming timing;
  placement::SimulationResult simulation;  // simulation.iteration_s: the predicted iteration
  double closed_form_s = 0;                // the planner's closed form for the same timing
  std::vector<int> device_of_rank;         // rank = replica x stages + stage
  // The data-parallel mode as the job runs it on this placement: H and bits given in the job,
  // or chosen by the planner for this placement (the H the timing is priced at), and why.
  placement::DataParallelChoice data_parallel;
};

// The full cost model the job is planned and predicted with.
placement::FullCostOptions cost_options(const LocalJob& job);

// network: job_topology(job); measured: measure_compute_speed() for the job. placement_file
// empty: search with job.placement (on the network localized with the initial share);
// otherwise read and check it (its topology id, shape and devices must match). Throws
// LocalJobError naming the file at fault.
// keep_sync_every (a resumed run: the H of the run whose checkpoint it resumes) replaces the
// planner's choice where the job leaves H to it: the plan is priced at it and says it was kept.
LocalPlan plan_local_job(const LocalJob& job, const placement::Topology& network,
                         const ComputeSpeed& measured, const std::string& placement_file,
                         std::optional<int> keep_sync_every = std::nullopt);

}  // namespace tessel::launcher
