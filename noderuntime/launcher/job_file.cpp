#include "noderuntime/launcher/job_file.h"

#include "api/stage_job_file.h"
#include "placement/limits.h"

namespace tessel::launcher {
namespace {

// The local job as the TrainingJob spec it stands for (a local job file is a thin form of one;
// a TrainingJob manifest comes back as it was parsed, with its data path resolved).
// H and the bits are the plan's: given in the job, or the planner's choice for its placement.
api::TrainingJobSpec trainingjob_spec(const LocalJob& job, const LocalPlan& plan) {
  const placement::Workload& w = job.workload;
  const LocalTraining& t = job.training;
  api::TrainingJobSpec spec;
  spec.model.layers = w.layers;
  spec.model.hidden = w.hidden;
  spec.model.ffn_hidden = w.ffn();
  spec.model.heads = w.heads;
  spec.model.seq_len = w.seq_len;
  spec.model.vocab = w.vocab;
  spec.model.precision = w.precision;
  spec.model.recompute_activations = w.recompute_activations;
  spec.micro_batch = w.micro_batch;
  spec.global_batch = w.global_batch;
  spec.parallelism.stages = job.stages;
  spec.parallelism.replicas = job.replicas;
  spec.parallelism.virtual_stages = job.chunks();
  spec.parallelism.schedule = job.schedule.kind;
  spec.parallelism.microbatch_group = job.schedule.microbatch_group;
  spec.parallelism.overlap = job.schedule.overlap;
  spec.training.steps = t.steps;
  spec.training.learning_rate = t.learning_rate;
  spec.training.weight_decay = t.weight_decay;
  spec.training.beta1 = t.beta1;
  spec.training.beta2 = t.beta2;
  spec.training.eps = t.eps;
  spec.training.grad_clip = t.grad_clip;
  spec.training.seed = t.seed;
  spec.training.threads = t.threads;
  if (job.data_parallel.enabled != plan.data_parallel.low_communication()) {
    throw LocalJobError(
        "cannot write the stage processes' job file: the plan's data-parallel mode (" +
        placement::data_parallel_name(plan.data_parallel.mode) + ") is not the job's");
  }
  if (const stage::LowCommunication& l = job.data_parallel; l.enabled) {
    spec.data_parallel = {placement::DataParallelKind::LowCommunication,
                          plan.data_parallel.mode.sync_every,
                          plan.data_parallel.mode.delta_bits,
                          l.outer_learning_rate,
                          l.outer_momentum,
                          l.nesterov,
                          l.delayed,
                          l.stagger};
  }
  if (job.data.kind == stage::DataSpec::Kind::kText) {
    spec.data.text_path = job.data.path;
  } else {
    spec.data.synthetic = true;
    spec.data.synthetic_seed = job.data.seed;
    spec.data.synthetic_bytes = job.data.bytes;
  }
  spec.checkpoint.interval_steps = job.checkpoint_interval;
  spec.checkpoint.keep = job.checkpoint_keep;
  spec.network.connect_timeout_s = job.connect_timeout_s;
  spec.network.io_timeout_s = job.io_timeout_s;
  return spec;
}

}  // namespace

std::optional<int> sync_every_of_job_file(const std::string& path) {
  std::string why;  // an earlier job.json that cannot be read keeps nothing
  const std::optional<std::string> text =
      placement::read_file_bounded(path, api::kMaxStageJobFileBytes, &why);
  if (!text) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("data_parallel") || !j["data_parallel"].is_object())
    return std::nullopt;
  const nlohmann::json h = j["data_parallel"].value("sync_every", nlohmann::json());
  if (!h.is_number_integer() || h.get<int64_t>() < 1 || h.get<int64_t>() > stage::kMaxSyncEvery)
    return std::nullopt;
  return h.get<int>();
}

std::string tasklet_label(int stage, int replica) {
  return "stage " + std::to_string(stage) + " replica " + std::to_string(replica);
}

nlohmann::ordered_json make_job_json(const LocalJob& job, const LocalPlan& plan,
                                     const JobFilePaths& paths, uint64_t job_id) {
  api::StageJobFile file;
  file.job_id = job_id;
  file.model_name = job.workload.name;
  file.layer_split = plan.layer_split;
  if (!paths.rank_hosts.empty() && static_cast<int>(paths.rank_hosts.size()) != job.world_size()) {
    throw LocalJobError(
        "cannot write the stage processes' job file: " + std::to_string(paths.rank_hosts.size()) +
        " rank hosts for " + std::to_string(job.world_size()) + " ranks (one per rank, or none)");
  }
  for (int r = 0; r < job.world_size(); ++r) {
    const std::string host = paths.rank_hosts.empty() ? "127.0.0.1" : paths.rank_hosts[r];
    file.ranks.push_back({r % job.stages, r / job.stages, host, 0, ""});
  }
  if (job.data.kind == stage::DataSpec::Kind::kText) file.data_path = job.data.path;
  if (job.checkpoint_interval >= 0) file.checkpoint_dir = paths.checkpoint_dir;
  file.checkpoint_resume = job.resume;
  file.rendezvous = api::StageEndpoint{paths.rendezvous_address, paths.token_file, ""};
  if (!paths.progress_address.empty()) {
    file.progress = api::StageEndpoint{paths.progress_address, "", ""};
  }
  file.trace_pattern = paths.trace_pattern;
  file.links = {{"topology", paths.topology}, {"devices", plan.device_of_rank}};
  if (!paths.shape_links) file.links["shape"] = false;
  if (!paths.warm_up_links) file.links["warmup"] = false;
  if (job.training.optimizer != stage::InnerOptimizer::kAdamW) {
    file.optimizer = stage::to_string(job.training.optimizer);
  }
  try {
    return api::stage_job_json(trainingjob_spec(job, plan), file);
  } catch (const api::ManifestError& e) {
    throw LocalJobError(std::string("cannot write the stage processes' job file: ") + e.what());
  }
}

}  // namespace tessel::launcher
