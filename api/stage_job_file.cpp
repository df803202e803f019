#include "api/stage_job_file.h"

#include <cmath>
#include <map>
#include <stdexcept>
#include <utility>

#include "placement/limits.h"

namespace tessel::api {
namespace {

using nlohmann::ordered_json;

std::string str(int64_t n) { return std::to_string(n); }

// Every value the caller decided, checked by the rules the stage's parser applies; fields are
// named by their job.json path.
class Checks {
 public:
  void fail(std::string field, std::string message) {
    errors_.push_back({std::move(field), std::move(message)});
  }
  // JSON holds UTF-8 text only (a path of other bytes cannot be written).
  bool utf8(const std::string& field, const std::string& value) {
    try {
      (void)ordered_json(value).dump();
      return true;
    } catch (const nlohmann::json::type_error&) {
      fail(field, "is not UTF-8 text");
      return false;
    }
  }
  // A path the stages open: required, or optional when empty.
  void path(const std::string& field, const std::string& value, bool required) {
    if (value.empty() && !required) return;
    if (const std::string why = placement::job_file_path_violation(value); !why.empty()) {
      fail(field, why);
    } else {
      utf8(field, value);
    }
  }
  void address(const std::string& field, const std::string& value) {
    if (!utf8(field, value)) return;
    if (value.find('\0') != std::string::npos) return fail(field, "has a NUL character");
    if (!placement::is_host_port(value)) fail(field, "expected host:port, got '" + value + "'");
  }
  const std::vector<FieldError>& errors() const { return errors_; }

 private:
  std::vector<FieldError> errors_;
};

void check_layer_split(const placement::Workload& w, const ParallelismSpec& p,
                       const std::vector<int>& split, Checks& checks) {
  if (split.empty()) return;
  const int64_t virtual_stages = int64_t{p.stages} * p.virtual_stages;
  if (static_cast<int64_t>(split.size()) != virtual_stages) {
    checks.fail(
        "pipeline.layer_split",
        "has " + str(split.size()) + " entries, stages x virtualStages is " + str(virtual_stages));
    return;
  }
  int64_t layers = 0;
  for (size_t i = 0; i < split.size(); ++i) {
    if (split[i] < 1) {
      checks.fail("pipeline.layer_split[" + str(i) + "]",
                  "every virtual stage needs a layer, got " + str(split[i]));
    }
    layers += split[i];
  }
  if (layers != w.layers) {
    checks.fail("pipeline.layer_split",
                "sums to " + str(layers) + " layers, the model has " + str(w.layers));
  }
}

void check_ranks(const ParallelismSpec& p, const StageJobFile& f, Checks& checks) {
  const int64_t world = int64_t{p.stages} * p.replicas;
  if (static_cast<int64_t>(f.ranks.size()) != world) {
    checks.fail("ranks",
                "has " + str(f.ranks.size()) + " entries, stages x replicas is " + str(world));
    return;
  }
  std::map<std::pair<int, int>, size_t> rank_of;  // (stage, replica) -> the first rank
  for (size_t rank = 0; rank < f.ranks.size(); ++rank) {
    const StageRank& r = f.ranks[rank];
    const std::string at = "ranks[" + str(rank) + "]";
    if (r.stage < 0 || r.stage >= p.stages) {
      checks.fail(at + ".stage", "must be in [0, " + str(p.stages - 1) + "], got " + str(r.stage));
    }
    if (r.replica < 0 || r.replica >= p.replicas) {
      checks.fail(at + ".replica",
                  "must be in [0, " + str(p.replicas - 1) + "], got " + str(r.replica));
    }
    if (const auto [it, added] = rank_of.insert({{r.stage, r.replica}, rank}); !added) {
      checks.fail(at, "stage " + str(r.stage) + " replica " + str(r.replica) + " is already rank " +
                          str(it->second));
    }
    if (r.host.empty()) {
      checks.fail(at + ".host", "must not be empty");
    } else if (r.host.find('\0') != std::string::npos) {
      checks.fail(at + ".host", "has a NUL character");
    } else {
      checks.utf8(at + ".host", r.host);
    }
    const int min_port = f.rendezvous ? 0 : 1;  // port 0 binds any: the rendezvous tells peers
    if (r.port < min_port || r.port > 65535) {
      checks.fail(at + ".port", "must be in [" + str(min_port) + ", 65535], got " + str(r.port));
    }
    if (!r.island.empty() && checks.utf8(at + ".island", r.island)) {
      if (const std::string why = placement::island_label_violation(r.island); !why.empty()) {
        checks.fail(at + ".island", why);
      }
    }
  }
}

void check_services(const StageJobFile& f, Checks& checks) {
  if (f.rendezvous) {
    checks.address("rendezvous.address", f.rendezvous->address);
    checks.path("rendezvous.token_file", f.rendezvous->token_file, true);
    checks.path("rendezvous.ca_file", f.rendezvous->ca_file, false);
  }
  if (!f.advertise_env.empty()) {
    if (!f.rendezvous) {
      checks.fail("rendezvous.advertise_env", "is for ranks that meet at a rendezvous; none given");
    } else if (!placement::is_env_var_name(f.advertise_env)) {
      checks.fail("rendezvous.advertise_env",
                  "expected an environment variable's name, got '" + f.advertise_env + "'");
    }
  }
  if (f.progress) {
    checks.address("progress.address", f.progress->address);
    checks.path("progress.token_file", f.progress->token_file, false);
    checks.path("progress.ca_file", f.progress->ca_file, false);
  }
}

// The outer optimizer's settings as the stage's LowCommunication::validate takes them (H and
// delta_bits are the workload's, validated with it).
void check_data_parallel(const DataParallelSpec& d, Checks& checks) {
  if (!d.low_communication()) return;
  // The planner's choice is the caller's to fill in (placement/data_parallel_choice.h): the stages
  // would otherwise run their own default, which no plan priced.
  if (!d.sync_every) {
    checks.fail("data_parallel.sync_every",
                "not chosen: spec.dataParallel.syncEvery left to the planner, and the caller "
                "did not fill in its choice for the placement");
  }
  if (!d.delta_bits) {
    checks.fail("data_parallel.delta_bits",
                "not chosen: spec.dataParallel.deltaBits left to the planner, and the caller "
                "did not fill in its choice for the placement");
  }
  if (!std::isfinite(d.outer_learning_rate) || d.outer_learning_rate <= 0) {
    checks.fail("data_parallel.outer_learning_rate",
                "must be finite and > 0, got " + std::to_string(d.outer_learning_rate));
  }
  if (!(d.outer_momentum >= 0 && d.outer_momentum < 1)) {
    checks.fail("data_parallel.outer_momentum",
                "must be in [0, 1), got " + std::to_string(d.outer_momentum));
  }
}

// links.shape, links.warmup and links.pairs by the rules the stage's parser applies (its topology form is the
// launcher's, checked by the stage when it loads the topology).
void check_links(const ordered_json& links, size_t ranks, Checks& checks) {
  for (const char* flag : {"shape", "warmup"}) {
    if (links.contains(flag) && !links[flag].is_boolean()) {
      checks.fail(std::string("links.") + flag,
                  std::string("expected true or false, got ") + links[flag].dump());
    }
  }
  if (!links.contains("pairs")) return;
  const ordered_json& pairs = links["pairs"];
  if (!pairs.is_array())
    return checks.fail("links.pairs", "expected an array of {a, b, gbps, latency_ms}");
  for (size_t i = 0; i < pairs.size(); ++i) {
    const std::string at = "links.pairs[" + str(i) + "]";
    const ordered_json& p = pairs[i];
    if (!p.is_object()) {
      checks.fail(at, "expected an object {a, b, gbps, latency_ms}");
      continue;
    }
    for (const char* end : {"a", "b"}) {
      const ordered_json* v = p.contains(end) ? &p[end] : nullptr;
      if (v == nullptr || !v->is_number_integer() || v->get<int64_t>() < 0 ||
          v->get<int64_t>() >= static_cast<int64_t>(ranks)) {
        checks.fail(at + "." + end, "must be a rank in [0, " +
                                        str(static_cast<int64_t>(ranks) - 1) + "], got " +
                                        (v ? v->dump() : std::string("nothing")));
      }
    }
    if (p.contains("a") && p.contains("b") && p["a"] == p["b"]) {
      checks.fail(at + ".b", "a link joins two different ranks, got " + p["b"].dump() + " twice");
    }
    for (const char* field : {"gbps", "latency_ms"}) {
      if (!p.contains(field)) continue;
      const ordered_json& v = p[field];
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
        checks.fail(at + "." + field, "must be a finite number >= 0, got " + v.dump());
      }
    }
  }
}

std::vector<FieldError> check(const TrainingJobSpec& spec, const placement::Workload& w,
                              const StageJobFile& f) {
  Checks checks;
  check_layer_split(w, spec.parallelism, f.layer_split, checks);
  check_ranks(spec.parallelism, f, checks);
  if (spec.data.synthetic) {
    if (!f.data_path.empty()) checks.fail("data.path", "the job's data is synthetic");
  } else {
    checks.path("data.path", f.data_path, true);
  }
  checks.path("checkpoint.dir", f.checkpoint_dir, false);
  checks.path("trace.path", f.trace_pattern, false);
  check_services(f, checks);
  checks.utf8("workload.model.name", f.model_name);
  if (!f.optimizer.empty() && f.optimizer != "adamw" && f.optimizer != "sgd") {
    checks.fail("training.optimizer", "must be \"adamw\" or \"sgd\", got '" + f.optimizer + "'");
  }
  check_data_parallel(spec.data_parallel, checks);
  if (!f.links.is_null() && !f.links.is_object()) {
    checks.fail("links", std::string("expected an object or nothing, got ") + f.links.type_name());
  } else {
    try {
      (void)f.links.dump();
      if (f.links.is_object()) check_links(f.links, f.ranks.size(), checks);
    } catch (const nlohmann::json::type_error&) {
      checks.fail("links", "holds text that is not UTF-8");
    }
  }
  return checks.errors();
}

ordered_json workload_json(const TrainingJobSpec& spec, const placement::Workload& w,
                           const std::string& model_name) {
  ordered_json model;
  const std::string name = model_name.empty() ? spec.model.preset : model_name;
  if (!name.empty()) model["name"] = name;
  model["layers"] = w.layers;
  model["hidden"] = w.hidden;
  model["ffn_hidden"] = w.ffn();
  model["heads"] = w.heads;
  model["seq_len"] = w.seq_len;
  model["vocab"] = w.vocab;
  model["precision"] = placement::to_string(w.precision);
  model["recompute_activations"] = w.recompute_activations;
  return {{"model", std::move(model)},
          {"training", {{"micro_batch", w.micro_batch}, {"global_batch", w.global_batch}}}};
}

// job.json's data_parallel section of a low-communication job, by the names the stage's
// parse_job_spec reads (noderuntime/stage/job_spec.h; the one writer of the section, which
// tests/stage/stage_job_file_data_parallel_test.cpp reads back through that parser).
ordered_json data_parallel_json(const DataParallelSpec& d) {
  return {{"mode", placement::to_string(d.mode)},
          {"sync_every", d.sync_every.value()},
          {"delta_bits", d.delta_bits.value()},
          {"outer_learning_rate", d.outer_learning_rate},
          {"outer_momentum", d.outer_momentum},
          {"nesterov", d.nesterov},
          {"delayed", d.delayed},
          {"stagger", d.stagger}};
}

ordered_json endpoint_json(const StageEndpoint& e) {
  ordered_json j = {{"address", e.address}};
  if (!e.token_file.empty()) j["token_file"] = e.token_file;
  if (!e.ca_file.empty()) j["ca_file"] = e.ca_file;
  return j;
}

}  // namespace

ordered_json unshaped_links_json(const std::vector<StageLinkPair>& pairs) {
  ordered_json links = {{"shape", false}};
  if (pairs.empty()) return links;
  ordered_json listed = ordered_json::array();
  for (const StageLinkPair& p : pairs) {
    listed.push_back({{"a", p.a}, {"b", p.b}, {"gbps", p.gbps}, {"latency_ms", p.latency_ms}});
  }
  links["pairs"] = std::move(listed);
  return links;
}

ordered_json stage_job_json(const TrainingJobSpec& spec, const StageJobFile& f) {
  placement::Workload w;
  try {
    w = spec.workload();
  } catch (const placement::WorkloadError& e) {
    throw ManifestError("job.json", {{"workload", e.what()}});
  }
  if (std::vector<FieldError> errors = check(spec, w, f); !errors.empty()) {
    throw ManifestError("job.json", std::move(errors));
  }
  const ParallelismSpec& p = spec.parallelism;
  const TrainingSpec& t = spec.training;
  ordered_json j;
  j["format_version"] = 1;
  j["job_id"] = f.job_id;
  j["workload"] = workload_json(spec, w, f.model_name);
  j["training"] = {{"steps", t.steps},
                   {"learning_rate", t.learning_rate},
                   {"weight_decay", t.weight_decay},
                   {"beta1", t.beta1},
                   {"beta2", t.beta2},
                   {"eps", t.eps},
                   {"grad_clip", t.grad_clip},
                   {"seed", t.seed},
                   {"threads", t.threads.value_or(1)}};
  if (!f.optimizer.empty()) j["training"]["optimizer"] = f.optimizer;
  if (spec.data_parallel.low_communication()) {
    j["data_parallel"] = data_parallel_json(spec.data_parallel);
  }
  if (spec.data.synthetic) {
    j["data"] = {{"kind", "synthetic"},
                 {"seed", spec.data.synthetic_seed},
                 {"bytes", spec.data.synthetic_bytes}};
  } else {
    j["data"] = {{"kind", "text"}, {"path", f.data_path}};
  }
  j["schedule"] = {{"kind", placement::to_string(p.schedule)},
                   {"chunks", p.virtual_stages},
                   {"microbatch_group", p.microbatch_group},
                   {"overlap", p.overlap}};
  j["pipeline"] = {{"stages", p.stages}, {"replicas", p.replicas}};
  if (!f.layer_split.empty()) j["pipeline"]["layer_split"] = f.layer_split;
  ordered_json ranks = ordered_json::array();
  for (const StageRank& r : f.ranks) {
    ordered_json rank = {
        {"stage", r.stage}, {"replica", r.replica}, {"host", r.host}, {"port", r.port}};
    if (!r.island.empty()) rank["island"] = r.island;
    ranks.push_back(std::move(rank));
  }
  j["ranks"] = std::move(ranks);
  if (!f.links.is_null()) j["links"] = f.links;
  j["timeouts"] = {{"connect_s", spec.network.connect_timeout_s},
                   {"io_s", spec.network.io_timeout_s}};
  if (!f.checkpoint_dir.empty()) {
    ordered_json checkpoint = {{"dir", f.checkpoint_dir},
                               {"interval", spec.checkpoint.interval_steps},
                               {"resume", f.checkpoint_resume},
                               {"keep", spec.checkpoint.keep}};
    if (!f.checkpoint_shared) checkpoint["shared"] = false;  // true is the reader's default
    j["checkpoint"] = std::move(checkpoint);
  }
  if (!f.trace_pattern.empty()) j["trace"] = {{"path", f.trace_pattern}};
  if (f.progress) j["progress"] = endpoint_json(*f.progress);
  if (f.rendezvous) {
    ordered_json rendezvous = endpoint_json(*f.rendezvous);
    if (!f.advertise_env.empty()) rendezvous["advertise_env"] = f.advertise_env;
    j["rendezvous"] = std::move(rendezvous);
  }
  return j;
}

std::string stage_job_text(const TrainingJobSpec& spec, const StageJobFile& f) {
  std::string text = stage_job_json(spec, f).dump(2) + "\n";
  if (text.size() > kMaxStageJobFileBytes) {
    throw ManifestError("job.json", {{"", "is " + str(text.size()) + " bytes, more than the " +
                                              str(kMaxStageJobFileBytes) +
                                              " a ConfigMap holds (fewer ranks, shorter "
                                              "island labels or paths)"}});
  }
  return text;
}

uint64_t stage_job_id(const std::string& uid, int64_t attempt) {
  if (uid.empty()) throw std::invalid_argument("stage_job_id: the TrainingJob has no metadata.uid");
  if (attempt < 0) throw std::invalid_argument("stage_job_id: a negative start attempt");
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a's offset basis and prime
  const auto add = [&hash](const std::string& text) {
    for (const char c : text) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ull;
    }
  };
  add(uid);
  if (attempt > 0) add("#" + std::to_string(attempt));
  const uint64_t id = hash & 0x7fffffffffffffffull;
  return id == 0 ? 1 : id;
}

}  // namespace tessel::api
