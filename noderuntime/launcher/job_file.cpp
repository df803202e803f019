#include "noderuntime/launcher/job_file.h"

namespace tessel::launcher {

std::string tasklet_label(int stage, int replica) {
  return "stage " + std::to_string(stage) + " replica " + std::to_string(replica);
}

nlohmann::ordered_json make_job_json(const LocalJob& job, const LocalPlan& plan,
                                     const JobFilePaths& paths, uint64_t job_id) {
  using nlohmann::ordered_json;
  const placement::Workload& w = job.workload;
  const LocalTraining& t = job.training;
  ordered_json j;
  j["format_version"] = 1;
  j["job_id"] = job_id;
  j["workload"] = {
      {"model",
       {{"name", w.name},
        {"layers", w.layers},
        {"hidden", w.hidden},
        {"ffn_hidden", w.ffn()},
        {"heads", w.heads},
        {"seq_len", w.seq_len},
        {"vocab", w.vocab},
        {"precision", placement::to_string(w.precision)},
        {"recompute_activations", false}}},
      {"training", {{"micro_batch", w.micro_batch}, {"global_batch", w.global_batch}}}};
  j["training"] = {{"steps", t.steps},
                   {"learning_rate", t.learning_rate},
                   {"weight_decay", t.weight_decay},
                   {"beta1", t.beta1},
                   {"beta2", t.beta2},
                   {"eps", t.eps},
                   {"grad_clip", t.grad_clip},
                   {"seed", t.seed},
                   {"threads", t.threads}};
  if (job.data.kind == stage::DataSpec::Kind::kText) {
    j["data"] = {{"kind", "text"}, {"path", job.data.path}};
  } else {
    j["data"] = {{"kind", "synthetic"}, {"seed", job.data.seed}, {"bytes", job.data.bytes}};
  }
  j["schedule"] = {{"kind", placement::to_string(job.schedule.kind)},
                   {"chunks", job.chunks()},
                   {"microbatch_group", job.schedule.microbatch_group},
                   {"overlap", job.schedule.overlap}};
  j["pipeline"] = {
      {"stages", job.stages}, {"replicas", job.replicas}, {"layer_split", plan.layer_split}};
  ordered_json ranks = ordered_json::array();
  for (int r = 0; r < job.world_size(); ++r) {
    ranks.push_back({{"stage", r % job.stages},
                     {"replica", r / job.stages},
                     {"host", "127.0.0.1"},
                     {"port", 0}});
  }
  j["ranks"] = std::move(ranks);
  j["links"] = {{"topology", paths.topology}, {"devices", plan.device_of_rank}};
  j["timeouts"] = {{"connect_s", job.connect_timeout_s}, {"io_s", job.io_timeout_s}};
  if (job.checkpoint_interval >= 0) {
    j["checkpoint"] = {{"dir", paths.checkpoint_dir},
                       {"interval", job.checkpoint_interval},
                       {"resume", job.resume},
                       {"keep", job.checkpoint_keep}};
  }
  if (!paths.trace_pattern.empty()) j["trace"] = {{"path", paths.trace_pattern}};
  if (!paths.progress_address.empty()) j["progress"] = {{"address", paths.progress_address}};
  j["rendezvous"] = {{"address", paths.rendezvous_address}, {"token_file", paths.token_file}};
  return j;
}

}  // namespace tessel::launcher
