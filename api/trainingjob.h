// The TrainingJob (tessel.dev/v1alpha1) as one C++ type, and the one parser every consumer uses:
// `tessel local` (from a manifest file), the admission webhook and the operator (from the API's
// JSON). Parsing defaults the object and validates it against the CRD's schema (crds/, compiled
// in), then checks the rules that span fields; every error names its field, and all errors are
// reported at once (ManifestError).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/label_selector.h"
#include "api/manifest_error.h"
#include "placement/schedule.h"
#include "placement/search.h"
#include "placement/workload.h"

namespace tessel::api {

// Job names become pod names ("<job>-s<stage>-r<replica>"), label values and folder names:
// a DNS-1123 label short enough that every derived name stays a valid label (63 characters).
inline constexpr size_t kMaxJobNameLength = 45;

struct ModelSpec {
  std::string preset;  // empty: a shape of its own
  int layers = 0, hidden = 0, ffn_hidden = 0, heads = 0, seq_len = 0;
  int vocab = 256;
  std::optional<placement::Precision> precision;  // unset: bf16 on GPUs, fp32 on CPUs
  bool recompute_activations = false;
};

struct ParallelismSpec {
  int stages = 1;
  int replicas = 1;
  int virtual_stages = 1;
  placement::ScheduleKind schedule = placement::ScheduleKind::OneFOneB;
  int microbatch_group = 0;
  bool overlap = true;
};

struct TrainingSpec {
  int64_t steps = 0;
  double learning_rate = 3e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;
  uint64_t seed = 1337;
  std::optional<int> threads;
};

// spec.dataParallel: synchronous data parallelism, or the low-communication mode
// (docs/low-communication.md; the stage's LowCommunication, noderuntime/stage/training_options.h,
// whose defaults the outer settings are). The fields besides mode are meaningful for
// low-communication only. H and the bits left out are the planner's to choose for the placement
// the job gets (placement/data_parallel_choice.h); job.json always carries the numbers.
struct DataParallelSpec {
  placement::DataParallelKind mode = placement::DataParallelKind::Synchronous;
  std::optional<int> sync_every;  // H, 1 to placement::kMaxSyncEvery; none: the planner's
  std::optional<int> delta_bits;  // 32, 8 or 4; none: the planner's
  double outer_learning_rate = 0.7;
  double outer_momentum = 0.9;  // [0, 1)
  bool nesterov = true;
  bool delayed = true;
  bool stagger = false;

  bool low_communication() const { return mode == placement::DataParallelKind::LowCommunication; }
};

struct DataSpec {
  std::string text_path;  // set for text data (as written: relative paths are the consumer's)
  bool synthetic = false;
  uint64_t synthetic_seed = 1;
  int64_t synthetic_bytes = 1 << 20;
};

struct PlacementSpec {
  placement::Strategy strategy = placement::Strategy::Evolutionary;
  int64_t evaluations = 5000;
  uint64_t seed = 1;
  std::string cost_model = "full";  // full or paper
  LabelSelector cluster_selector;
  LabelSelector gpu_selector;
};

struct CheckpointSpec {
  int64_t interval_steps = 0;  // 0: only at the end and on suspend
  int keep = 3;
  std::string path;
};

struct FailurePolicySpec {
  int max_restarts = 3;
  int backoff_seconds = 10;
  int start_timeout_seconds = 600;
};

// spec.elastic: the job may run with fewer data-parallel replicas when the GPUs of all of them
// are not free, keeping the global batch (more micro-batches per replica).
struct ElasticSpec {
  int min_replicas = 1;
};

struct NetworkSpec {
  bool host_network = false;  // mode HostNetwork
  double connect_timeout_s = 60;
  double io_timeout_s = 120;
};

struct TrainingJobSpec {
  ModelSpec model;
  ParallelismSpec parallelism;
  int micro_batch = 1;
  int global_batch = 1;
  TrainingSpec training;
  DataParallelSpec data_parallel;
  DataSpec data;
  nlohmann::json pod_template = nlohmann::json::object();  // spec.template as given (defaulted)
  PlacementSpec placement;
  CheckpointSpec checkpoint;
  FailurePolicySpec failure_policy;
  std::optional<ElasticSpec> elastic;  // absent: not elastic
  NetworkSpec network;
  bool suspend = false;
  std::string managed_by = "tessel.dev/operator";

  int64_t devices() const { return int64_t{parallelism.stages} * parallelism.replicas; }
  // The data-parallel widths the job may run at, widest first: parallelism.replicas, then (when
  // elastic) each narrower width down to minReplicas that divides the global batch into whole
  // micro-batches per replica that the schedule accepts.
  std::vector<int> usable_widths() const;
  // The model, batch and data-parallel mode as the placement and the runtime see them
  // (validated). H and bits not given are left to the planner (choose_sync_every,
  // choose_delta_bits).
  placement::Workload workload() const;
};

struct TrainingJob {
  std::string name;
  std::string namespace_name;
  int64_t generation = 0;
  TrainingJobSpec spec;
  nlohmann::json object;  // the whole object, defaulted
};

// Every error of a TrainingJob object (schema, metadata, rules across fields); empty when it is
// valid. `object` is defaulted in place first, as kube-apiserver defaults before validating.
std::vector<FieldError> trainingjob_errors(nlohmann::json& object);
// Errors of an update: what may not change while the job has pods (model, parallelism, batch,
// data), checked against the stored object.
std::vector<FieldError> trainingjob_update_errors(const nlohmann::json& old_object,
                                                  const nlohmann::json& new_object);

// The typed job; throws ManifestError(source, every error).
TrainingJob parse_trainingjob(nlohmann::json object, const std::string& source);
// A manifest file (YAML or JSON) of one TrainingJob, at most kMaxManifestBytes.
TrainingJob load_trainingjob_file(const std::string& path);
inline constexpr uint64_t kMaxManifestBytes = 3 << 20;  // kube-apiserver's request body limit

// True when the text is a TrainingJob manifest (kind: TrainingJob), for callers that accept
// either it or another file format.
bool is_trainingjob_manifest(const nlohmann::json& document);

}  // namespace tessel::api
