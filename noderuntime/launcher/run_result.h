// What a local run did and measured: the record the report is written from and the benches
// read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "noderuntime/launcher/local_plan.h"
#include "noderuntime/launcher/progress_tracker.h"

namespace tessel::launcher {

enum class RunStatus { kDone, kStopped, kFailed };

struct RankRecord {
  std::string label;  // "stage 1 replica 0"
  int device = 0;
  uint16_t port = 0;
  std::string exit;     // "exited with status 0", "was killed by SIGKILL"
  std::string backend;  // what it computed on, from its log: "cpu", "cuda"; empty: not known
  std::vector<progress::StepMetrics> steps;
};

struct LocalRunResult {
  RunStatus status = RunStatus::kDone;
  int exit_code = 0;    // of `tessel local`: 0, 1 (failed, or its report not written),
                        // 128 + signal (stopped)
  std::string message;  // why it failed or stopped; empty when done
  double wall_s = 0;    // from starting the processes to the last one ending
  LocalPlan plan;       // its topology: what was planned, emulated and predicted on
  // false: the links were left to the network between the ranks' hosts (LocalNetwork).
  bool links_shaped = true;
  std::vector<progress::StepMetrics> steps;  // the steps this run completed, in order
                                             // (each over all ranks: progress_tracker.h)
  std::optional<int64_t> resumed_from;       // the checkpoint step it resumed from
  // What its ranks skipped on resuming, and why (resume_skips.h): "step 3: <file>: <fault>
  // (rank 1)"; empty when nothing was.
  std::vector<std::string> resume_skipped;
  std::vector<RankRecord> ranks;
  // The first step left out: the median step time; in the low-communication mode the mean,
  // since one step in every H also waits for the sync and the prediction is a cycle's mean.
  std::optional<double> measured_iteration_s;
  double unigram_entropy = 0;    // nats, of the training data's bytes
  std::string data_description;  // "file x.txt (412 KB)"
  std::string output_dir;
  std::string simulate_command;  // reproduces the prediction
  bool trace_written = false;
  std::vector<std::string> trace_missing;  // ranks' trace files that were not there
  // Why report.md, loss.svg or trace.json could not be written (the run's own outcome stays in
  // status and message); empty when they were.
  std::string report_error;
};

}  // namespace tessel::launcher
