// The local job file of `tessel local`: one YAML file that says what to train (model, data,
// training), how (schedule, stages x replicas) and on what emulated network (a topology file
// or a generated one). docs/runtime-local.md documents every field; examples/local/ holds one.
// Relative paths are resolved against the job file's folder. Every error names the file and
// the field, e.g. "job.yaml: pipeline.stages: must be in [1, 4], got 6".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "noderuntime/launcher/yaml_fields.h"
#include "noderuntime/stage/job_spec.h"
#include "placement/pipeline_timing.h"
#include "placement/search.h"
#include "placement/topology_generate.h"
#include "placement/workload.h"

namespace tessel::launcher {

struct TopologySource {
  std::string file;                                    // a topology file; empty when generated
  std::optional<placement::GeoTopologySpec> generate;  // devices = stages x replicas
  // Every link's bandwidth and latency multiplied by these: a world-wide network scaled to
  // what a small model on one machine can feel.
  double bandwidth_scale = 1;
  double latency_scale = 1;
};

struct LocalTraining {
  int steps = 0;
  double learning_rate = 3e-4;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // 0: off
  uint64_t seed = 1337;
  int threads = 1;  // compute threads per stage process
  stage::InnerOptimizer optimizer = stage::InnerOptimizer::kAdamW;  // training.optimizer
};

struct LocalSchedule {
  placement::ScheduleKind kind = placement::ScheduleKind::OneFOneB;
  int chunks = 1;  // v: 2 or more for the interleaved schedule
  int microbatch_group = 0;
  bool overlap = true;
};

struct LocalPlacementOptions {
  placement::Strategy strategy = placement::Strategy::Evolutionary;
  long evaluations = 2000;
  uint64_t seed = 1;
};

struct LocalJob {
  std::string source;  // the job file, as given
  std::string name;
  TopologySource topology;
  placement::Workload workload;  // fp32 or bf16, activations kept: what the stage runtime trains
  LocalTraining training;
  stage::DataSpec data;  // paths resolved
  LocalSchedule schedule;
  int stages = 1;
  int replicas = 1;
  LocalPlacementOptions placement;
  double connect_timeout_s = 60;
  double io_timeout_s = 120;
  int checkpoint_interval = -1;  // -1: no checkpoints; 0: only at the end; n: every n steps
  bool resume = false;
  int checkpoint_keep = 3;  // checkpoint.keep: step folders kept (>= 1), job.json's "keep"
  // data_parallel: the same fields as job.json's (noderuntime/stage/job_spec.h); not enabled:
  // synchronous data parallelism. sync_every and delta_bits here are the given ones: where the
  // file leaves them to the planner (workload.data_parallel.choose_sync_every / choose_delta_bits)
  // the plan's choice runs (LocalPlan::data_parallel), not these defaults.
  stage::LowCommunication data_parallel;

  int world_size() const { return stages * replicas; }
  int chunks() const {
    return schedule.kind == placement::ScheduleKind::Interleaved ? schedule.chunks : 1;
  }
};

// source names the text in errors; relative paths are resolved against base_dir. The name
// (given, or else the file's stem) must be a Kubernetes DNS-1123 label.
LocalJob parse_local_job(const std::string& text, const std::string& source,
                         const std::string& base_dir);
// Reads and parses the file. Throws LocalJobError naming the file.
LocalJob load_local_job(const std::string& path);

// Empty when the stage runtime trains this precision: fp32, or bf16 (the CUDA backend's; a rank
// on the CPU computes it in fp32); else why not, naming the value and what is accepted.
std::string local_precision_problem(placement::Precision precision);

// Empty when path is a readable regular file of at most placement::kMaxTextBytes (the training
// text every token-reading stage process loads whole); else the reason, naming the path.
std::string text_data_problem(const std::string& path);

// Bytes of memory the job's stage processes need together, at least: fp32 parameters,
// gradients and Adam state, the activations each rank keeps in flight, the logits, and the
// corpus in the processes that read tokens. parse_local_job refuses a job whose estimate is
// more than the memory this machine has available, naming the model.
double estimate_local_job_memory(const LocalJob& job);

}  // namespace tessel::launcher
