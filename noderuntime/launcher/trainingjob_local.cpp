#include "noderuntime/launcher/trainingjob_local.h"

#include <filesystem>

#include "api/yaml_json.h"
#include "placement/limits.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

std::string resolve(const std::string& path, const std::string& base_dir) {
  return fs::path(path).is_absolute() || base_dir.empty() ? path
                                                          : (fs::path(base_dir) / path).string();
}

}  // namespace

LocalJob local_job_from_trainingjob(const api::TrainingJob& job, const std::string& source,
                                    const std::string& base_dir, const std::string& topology_file) {
  const api::TrainingJobSpec& spec = job.spec;
  const auto refuse = [&](const std::string& field, const std::string& why) {
    throw LocalJobError(source + ": " + field + ": " + why);
  };
  if (spec.model.precision) {
    if (const std::string why = local_precision_problem(*spec.model.precision); !why.empty()) {
      refuse("spec.model.precision", why);
    }
  }
  if (spec.model.recompute_activations) {
    refuse("spec.model.recomputeActivations", "the CPU stage runtime keeps its activations");
  }
  if (spec.placement.cost_model != "full") {
    refuse("spec.placement.costModel", "tessel local plans with the full cost model");
  }
  if (topology_file.empty()) {
    refuse("(job)",
           "a TrainingJob names no network; give the one to emulate with --topology FILE "
           "(e.g. examples/local/two-sites.yaml)");
  }
  LocalJob local;
  local.source = source;
  local.name = job.name;
  local.topology.file = topology_file;
  local.workload = spec.workload();
  local.workload.name = spec.model.preset.empty() ? job.name : spec.model.preset;
  LocalTraining& t = local.training;
  t.steps = static_cast<int>(spec.training.steps);  // <= placement::kMaxSteps
  t.learning_rate = spec.training.learning_rate;
  t.weight_decay = spec.training.weight_decay;
  t.beta1 = spec.training.beta1;
  t.beta2 = spec.training.beta2;
  t.eps = spec.training.eps;
  t.grad_clip = spec.training.grad_clip;
  t.seed = spec.training.seed;
  t.threads = spec.training.threads.value_or(1);
  if (const api::DataParallelSpec& d = spec.data_parallel; d.low_communication()) {
    stage::LowCommunication& l = local.data_parallel;  // local.workload carries it for the plan
    l.enabled = true;
    // Left out: the planner chooses them for the plan (local.workload says so).
    l.sync_every = d.sync_every.value_or(l.sync_every);
    l.delta_bits = d.delta_bits.value_or(l.delta_bits);
    l.outer_learning_rate = static_cast<float>(d.outer_learning_rate);
    l.outer_momentum = static_cast<float>(d.outer_momentum);
    l.nesterov = d.nesterov;
    l.delayed = d.delayed;
    l.stagger = d.stagger;
    l.final_step = t.steps;
  }
  if (spec.data.synthetic) {
    local.data.kind = stage::DataSpec::Kind::kSynthetic;
    local.data.seed = spec.data.synthetic_seed;
    local.data.bytes = spec.data.synthetic_bytes;
  } else {
    local.data.kind = stage::DataSpec::Kind::kText;
    local.data.path = resolve(spec.data.text_path, base_dir);
    if (const std::string why = text_data_problem(local.data.path); !why.empty()) {
      refuse("spec.data.text.path", why);
    }
  }
  local.schedule.kind = spec.parallelism.schedule;
  local.schedule.chunks = spec.parallelism.virtual_stages;
  local.schedule.microbatch_group = spec.parallelism.microbatch_group;
  local.schedule.overlap = spec.parallelism.overlap;
  local.stages = spec.parallelism.stages;
  local.replicas = spec.parallelism.replicas;
  local.placement.strategy = spec.placement.strategy;
  local.placement.evaluations = static_cast<long>(spec.placement.evaluations);
  local.placement.seed = spec.placement.seed;
  local.connect_timeout_s = spec.network.connect_timeout_s;
  local.io_timeout_s = spec.network.io_timeout_s;
  if (job.object["spec"].contains("checkpoint")) {
    local.checkpoint_interval = static_cast<int>(spec.checkpoint.interval_steps);
    local.checkpoint_keep = spec.checkpoint.keep;
  }
  const double needed = estimate_local_job_memory(local);
  if (const std::string shortfall = placement::memory_shortfall(needed); !shortfall.empty()) {
    refuse("spec.model", "the stage processes of this job " + shortfall);
  }
  return local;
}

LocalJob load_job_file(const std::string& path, const std::string& topology_file) {
  std::string why;
  const std::optional<std::string> text =
      placement::read_file_bounded(path, placement::kMaxJobFileBytes, &why);
  if (!text) throw LocalJobError(path + ": " + why);
  return parse_job_file(*text, path, topology_file);
}

LocalJob parse_job_file(const std::string& text, const std::string& path,
                        const std::string& topology_file) {
  const std::string base_dir = fs::path(path).parent_path().string();
  nlohmann::json document;
  try {
    document = api::yaml_to_json(text, path);
  } catch (const api::ManifestError&) {
    // Not YAML that JSON can hold: the local job parser says why, in its words.
    return parse_local_job(text, path, base_dir);
  }
  if (!api::is_trainingjob_manifest(document)) {
    if (!topology_file.empty()) {
      throw LocalJobError(path +
                          ": a local job file names its topology itself; --topology is "
                          "for TrainingJob manifests");
    }
    return parse_local_job(text, path, base_dir);
  }
  try {
    return local_job_from_trainingjob(api::parse_trainingjob(std::move(document), path), path,
                                      base_dir, topology_file);
  } catch (const api::ManifestError& e) {
    throw LocalJobError(e.what());
  }
}

}  // namespace tessel::launcher
