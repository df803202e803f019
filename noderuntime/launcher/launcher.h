// `tessel local` as a library: runs a whole training job on this machine. It measures how fast
// a stage process computes here, plans the placement on the job's topology (or takes a given
// one), writes job.json, starts one tessel-stage process per (stage, replica) with every link
// shaped like the topology's, takes their progress over gRPC (progress_server.h), prints one
// progress line per step (step, loss, tokens/s, bubble,
// network wait, ETA), and writes the report (run_report.h) and the merged trace.
//
// Stopping: SIGINT or SIGTERM to the launcher asks every stage process to stop after the
// current step (SIGTERM to each); a second signal, or the grace period passing, kills them.
// A stage process that dies or fails ends the job: the others are stopped the same way and
// the error names the stage, replica and rank at fault. No stage process outlives the run.
// Signal handlers are installed while run_local_job runs; call it from one thread at a time,
// the one that stays alive for the whole run (the processes die with the thread that
// started them).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "noderuntime/launcher/local_job.h"
#include "noderuntime/launcher/run_result.h"

namespace tessel::launcher {

// Where the ranks placed on one device of the job's topology run (LocalNetwork).
struct DeviceHost {
  std::string host;  // the IPv4 address they bind and are reached at
  // Runs each of their processes, e.g. {"ip", "netns", "exec", "site-a"} (it must exec the
  // command it is given in the same process); empty: started directly.
  std::vector<std::string> command_prefix;
};

// Where the ranks run and what carries their links. The default: every rank on this machine's
// loopback, every link shaped in user space inside the transport like the topology's link.
struct LocalNetwork {
  // The launcher's rendezvous and progress servers listen on this host (IPv4); the ranks dial it.
  std::string server_host = "127.0.0.1";
  // Per device of the job's topology (index = device id): where the ranks the plan puts on it
  // run; empty: every rank on 127.0.0.1, started directly.
  std::vector<DeviceHost> devices;
  // false: the network between the devices' hosts is itself the link (e.g. network namespaces
  // joined by an emulator that the kernel's TCP sees): nothing is shaped in user space, and the
  // topology's bandwidths still size each link's TCP streams with the RTT the kernel measures.
  bool shape_links = true;
  // false: no warm-up of long fat links' streams (links."warmup", transport/link_warmup.h).
  bool warm_up_links = true;
};

struct LocalRunOptions {
  std::string output_dir;      // created; report.md, loss.svg, trace.json, job.json, logs/ ...
  std::string placement_file;  // empty: plan with the job's strategy
  std::optional<int> steps;    // overrides training.steps
  bool trace = false;          // write trace.json
  std::string stage_binary;    // empty: find_stage_binary("")
  // Every stage process's --device (noderuntime/stage/device_choice.h): cpu, cuda or auto
  // (CUDA for a bf16 job when the process can use a GPU). Several processes may share one GPU.
  std::string device = "auto";
  double grace_s = 30;      // after asking the processes to stop, kill them after this long
  std::FILE* out = stdout;  // progress and summary; nullptr: silent
  std::FILE* err = stderr;  // why the run failed, a report not written; nullptr: silent
  bool tty = false;         // rewrite the progress line in place instead of one per step
  LocalNetwork network;
};

// Throws LocalJobError (bad job, --device, placement, topology, network.devices not one per
// device of the topology, or missing tessel-stage, a file or
// folder that cannot be written, a resumed job whose checkpoint already holds its last step) before
// any process starts; afterwards every outcome is in the result (and the report): a report that
// cannot be written is result.report_error, said after the run's own outcome (exit status 1
// when the run itself succeeded).
//
// A resumed job (checkpoint.resume) continues from the newest checkpoint in
// <output>/checkpoints; the report and the last line say the steps run and the step resumed
// from. When that checkpoint is at or past the job's last step there is nothing to do: it is
// refused before anything is written, so the previous report.md stays as it was.
LocalRunResult run_local_job(LocalJob job, const LocalRunOptions& options);

// The output folder used when none is given: "tessel-runs/<job name>".
std::string default_output_dir(const LocalJob& job);

}  // namespace tessel::launcher
