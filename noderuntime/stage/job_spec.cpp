#include "noderuntime/stage/job_spec.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "noderuntime/stage/parameter_layout.h"
#include "noderuntime/stage/topology_links.h"
#include "placement/schedule.h"
#include "placement/topology.h"

namespace tessel::stage {
namespace {

using nlohmann::json;

// One JSON object of the job file: typed reads whose errors name the field's full path.
class Section {
 public:
  Section(const json& value, std::string path, const std::string& source)
      : value_(value), path_(std::move(path)), source_(source) {
    if (!value_.is_object()) fail(path_.empty() ? "(document)" : path_, "must be an object");
  }

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw ConfigError(source_ + ": " + field + ": " + why);
  }
  std::string field(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

  void allow(const std::set<std::string>& keys) const {
    for (const auto& [key, v] : value_.items()) {
      if (!keys.count(key)) fail(field(key), "unknown field");
    }
  }
  bool has(const std::string& key) const { return value_.contains(key); }
  const json& at(const std::string& key) const {
    if (!has(key)) fail(field(key), "missing");
    return value_.at(key);
  }
  Section section(const std::string& key) const { return Section(at(key), field(key), source_); }

  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
    if (!has(key)) return fallback;
    return required_integer(key, min, max);
  }
  int64_t required_integer(const std::string& key, int64_t min, int64_t max) const {
    const json& v = at(key);
    if (!v.is_number_integer()) fail(field(key), "expected an integer, got " + v.dump());
    const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)
                          ? INT64_MAX
                          : v.get<int64_t>();
    if (x < min || x > max) {
      fail(field(key), "must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                           "], got " + std::to_string(x));
    }
    return x;
  }
  uint64_t unsigned_integer(const std::string& key, uint64_t fallback) const {
    if (!has(key)) return fallback;
    const json& v = at(key);
    if (!v.is_number_unsigned())
      fail(field(key), "expected a non-negative integer, got " + v.dump());
    return v.get<uint64_t>();
  }
  double number(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      fail(field(key), "expected a finite number, got " + v.dump());
    }
    return v.get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = at(key);
    if (!v.is_boolean()) fail(field(key), "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    return required_string(key);
  }
  std::string required_string(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_string()) fail(field(key), "expected a string, got " + v.dump());
    return v.get<std::string>();
  }

 private:
  const json& value_;
  std::string path_;
  const std::string& source_;
};

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

void parse_workload(const Section& root, const std::string& source, JobSpec& job) {
  try {
    job.workload =
        placement::parse_workload_yaml(root.at("workload").dump(), source + ": workload");
  } catch (const placement::WorkloadError& e) {
    throw ConfigError(e.what());
  }
  if (job.workload.precision == placement::Precision::FP16) {
    root.fail("workload.model.precision",
              std::string("the stage runtime trains in fp32 (CPU) or bf16 (CUDA), got ") +
                  placement::to_string(job.workload.precision));
  }
  try {
    job.model = gpt_config_from_workload(job.workload);
  } catch (const ConfigError& e) {
    root.fail("workload", e.what());
  }
}

void parse_training(const Section& root, JobSpec& job) {
  const Section t = root.section("training");
  t.allow({"steps", "learning_rate", "weight_decay", "beta1", "beta2", "eps", "grad_clip", "seed",
           "threads", "optimizer"});
  job.steps = static_cast<int>(t.required_integer("steps", 1, kIntMax));
  TrainingOptions& o = job.training;
  o.adamw.learning_rate = static_cast<float>(t.number("learning_rate", 3e-4));
  o.adamw.weight_decay = static_cast<float>(t.number("weight_decay", 0.1));
  o.adamw.beta1 = static_cast<float>(t.number("beta1", 0.9));
  o.adamw.beta2 = static_cast<float>(t.number("beta2", 0.95));
  o.adamw.eps = static_cast<float>(t.number("eps", 1e-8));
  o.grad_clip = static_cast<float>(t.number("grad_clip", 1.0));
  o.seed = t.unsigned_integer("seed", 1337);
  job.threads = static_cast<int>(t.integer("threads", 1, 1, 256));
  try {
    o.optimizer = parse_inner_optimizer(t.string("optimizer", "adamw"));
  } catch (const std::invalid_argument& e) {
    t.fail("training.optimizer", e.what());
  }
}

void parse_data_parallel(const Section& root, JobSpec& job) {
  if (!root.has("data_parallel")) return;
  const Section d = root.section("data_parallel");
  const std::string mode = d.required_string("mode");
  if (mode == "synchronous") {
    d.allow({"mode"});
    return;
  }
  if (mode != kLowCommunicationMode) {
    d.fail("data_parallel.mode",
           "must be \"synchronous\" or \"low-communication\", got \"" + mode + "\"");
  }
  d.allow({"mode", "sync_every", "delta_bits", "outer_learning_rate", "outer_momentum", "nesterov",
           "delayed", "stagger"});
  LowCommunication& l = job.training.low_communication;
  l.enabled = true;
  l.sync_every = static_cast<int>(d.integer("sync_every", l.sync_every, 1, kMaxSyncEvery));
  l.delta_bits = static_cast<int>(d.integer("delta_bits", l.delta_bits, 4, 32));
  l.outer_learning_rate = static_cast<float>(d.number("outer_learning_rate", 0.7));
  l.outer_momentum = static_cast<float>(d.number("outer_momentum", 0.9));
  l.nesterov = d.boolean("nesterov", l.nesterov);
  l.delayed = d.boolean("delayed", l.delayed);
  l.stagger = d.boolean("stagger", l.stagger);
  l.final_step = job.steps;
}

void parse_data(const Section& root, JobSpec& job) {
  const Section d = root.section("data");
  const std::string kind = d.required_string("kind");
  if (kind == "synthetic") {
    d.allow({"kind", "seed", "bytes"});
    job.data.kind = DataSpec::Kind::kSynthetic;
    job.data.seed = d.unsigned_integer("seed", 1);
    job.data.bytes = d.integer("bytes", 1 << 20, 2, int64_t{1} << 40);
  } else if (kind == "text") {
    d.allow({"kind", "path"});
    job.data.kind = DataSpec::Kind::kText;
    job.data.path = d.required_string("path");
  } else {
    d.fail("data.kind", "must be \"synthetic\" or \"text\", got \"" + kind + "\"");
  }
}

void parse_schedule(const Section& root, JobSpec& job) {
  const Section s = root.section("schedule");
  s.allow({"kind", "chunks", "microbatch_group", "overlap"});
  try {
    job.training.schedule = placement::parse_schedule_kind(s.required_string("kind"));
  } catch (const std::invalid_argument& e) {
    s.fail("schedule.kind", e.what());
  }
  job.layout.chunks = static_cast<int>(s.integer("chunks", 1, 1, kIntMax));
  job.training.microbatch_group = static_cast<int>(s.integer("microbatch_group", 0, 0, kIntMax));
  job.training.overlap = s.boolean("overlap", true);
}

void parse_pipeline(const Section& root, JobSpec& job) {
  const Section p = root.section("pipeline");
  p.allow({"stages", "replicas", "layer_split"});
  job.layout.stages = static_cast<int>(p.required_integer("stages", 1, kIntMax));
  job.layout.replicas = static_cast<int>(p.required_integer("replicas", 1, kIntMax));
  if (p.has("layer_split")) {
    const json& split = p.at("layer_split");
    if (!split.is_array()) p.fail("pipeline.layer_split", "expected an array of integers");
    for (const json& n : split) {
      if (!n.is_number_integer()) p.fail("pipeline.layer_split", "has a non-integer " + n.dump());
      job.layout.layer_split.push_back(n.get<int>());
    }
  } else {
    try {
      job.layout.layer_split =
          even_layer_split(job.model.layers, job.layout.stages * job.layout.chunks);
    } catch (const ConfigError& e) {
      p.fail("pipeline", e.what());
    }
  }
  try {
    job.training.micro_batch = job.workload.micro_batch;
    job.training.micro_batches = job.workload.micro_batches_per_replica(job.layout.replicas);
  } catch (const placement::WorkloadError& e) {
    p.fail("workload.training", e.what());
  }
}

// ranks[i].island: a label of 1 to kMaxIslandLabel characters [A-Za-z0-9._:/-].
std::string parse_island(const Section& r) {
  const std::string label = r.required_string("island");
  if (label.empty()) {
    r.fail(r.field("island"), "must not be empty (leave the field out for an island of its own)");
  }
  if (const std::string why = placement::island_label_violation(label); !why.empty()) {
    r.fail(r.field("island"), why);
  }
  return label;
}

void parse_ranks(const Section& root, const std::string& source, JobSpec& job) {
  const json& ranks = root.at("ranks");
  if (!ranks.is_array()) root.fail("ranks", "expected an array of {stage, replica, host, port}");
  PipelineLayout& layout = job.layout;
  if (static_cast<int>(ranks.size()) != layout.world_size()) {
    root.fail("ranks", "has " + std::to_string(ranks.size()) + " entries, stages x replicas is " +
                           std::to_string(layout.world_size()));
  }
  layout.rank_of_tasklet.assign(layout.world_size(), -1);
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const std::string path = "ranks[" + std::to_string(rank) + "]";
    const Section r(ranks[rank], path, source);
    r.allow({"stage", "replica", "host", "port", "island"});
    const int stage = static_cast<int>(r.required_integer("stage", 0, layout.stages - 1));
    const int replica = static_cast<int>(r.required_integer("replica", 0, layout.replicas - 1));
    int& slot = layout.rank_of_tasklet[stage * layout.replicas + replica];
    if (slot >= 0) {
      r.fail(path, "stage " + std::to_string(stage) + " replica " + std::to_string(replica) +
                       " is already rank " + std::to_string(slot));
    }
    slot = rank;
    const std::string host = r.required_string("host");
    if (host.empty()) r.fail(r.field("host"), "must not be empty");
    // With a rendezvous a rank may bind a port the kernel picks (0).
    const auto port =
        static_cast<uint16_t>(r.required_integer("port", job.rendezvous ? 0 : 1, 65535));
    job.addresses.push_back(
        {host, port, "stage " + std::to_string(stage) + " replica " + std::to_string(replica)});
    job.islands.push_back(r.has("island") ? parse_island(r) : std::string());
  }
  bool any = false;
  for (const std::string& label : job.islands) any = any || !label.empty();
  if (!any) job.islands.clear();
}

transport::LinkShape parse_shape(const Section& s) {
  const double gbps = s.number("gbps", 0);
  const double latency_ms = s.number("latency_ms", 0);
  if (gbps < 0) s.fail(s.field("gbps"), "must be >= 0 (0: unlimited)");
  if (latency_ms < 0) s.fail(s.field("latency_ms"), "must be >= 0");
  return {gbps * 1e9 / 8, latency_ms / 1e3};
}

// Every link shaped like the topology's link between the devices the two ranks run on.
transport::LinkEmulator parse_topology_links(const Section& l, int ranks) {
  const std::string path = l.required_string("topology");
  const json& devices = l.at("devices");
  if (!devices.is_array() || static_cast<int>(devices.size()) != ranks) {
    l.fail("links.devices",
           "expected an array of " + std::to_string(ranks) + " device indices (one per rank)");
  }
  std::vector<int> device_of_rank;
  for (const json& d : devices) {
    if (!d.is_number_integer()) l.fail("links.devices", "has a non-integer " + d.dump());
    device_of_rank.push_back(d.get<int>());
  }
  try {
    return links_from_topology(placement::load_topology_file(path), device_of_rank);
  } catch (const std::exception& e) {
    l.fail("links.topology", e.what());
  }
}

void parse_links(const Section& root, const std::string& source, JobSpec& job) {
  if (!root.has("links")) return;
  const Section l = root.section("links");
  l.allow({"topology", "devices", "default", "pairs", "shape", "warmup"});
  const int n = job.layout.world_size();
  transport::LinkEmulator links(n);
  if (l.has("topology") || l.has("devices")) {
    if (l.has("default")) l.fail("links.default", "cannot be combined with links.topology");
    links = parse_topology_links(l, n);
  }
  if (l.has("default")) {
    const Section d = l.section("default");
    d.allow({"gbps", "latency_ms"});
    const transport::LinkShape shape = parse_shape(d);
    links = transport::LinkEmulator::uniform(n, shape);
  }
  if (l.has("pairs")) {
    const json& pairs = l.at("pairs");
    if (!pairs.is_array()) l.fail("links.pairs", "expected an array of {a, b, gbps, latency_ms}");
    for (size_t i = 0; i < pairs.size(); ++i) {
      const Section p(pairs[i], "links.pairs[" + std::to_string(i) + "]", source);
      p.allow({"a", "b", "gbps", "latency_ms"});
      const int a = static_cast<int>(p.required_integer("a", 0, n - 1));
      const int b = static_cast<int>(p.required_integer("b", 0, n - 1));
      if (a == b) p.fail(p.field("b"), "a link joins two different ranks");
      const transport::LinkShape shape = parse_shape(p);
      links.set(a, b, shape);
      links.set(b, a, shape);
    }
  }
  job.links = links;
  job.shape_links = l.boolean("shape", true);
  job.warm_up_links = l.boolean("warmup", true);
}

void parse_timeouts(const Section& root, JobSpec& job) {
  if (!root.has("timeouts")) return;
  const Section t = root.section("timeouts");
  t.allow({"connect_s", "io_s"});
  auto duration = [&](const char* key, std::chrono::milliseconds fallback) {
    const double seconds = t.number(key, fallback.count() / 1e3);
    if (seconds <= 0) t.fail(t.field(key), "must be > 0");
    return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1e3)));
  };
  job.connect_timeout = duration("connect_s", job.connect_timeout);
  job.io_timeout = duration("io_s", job.io_timeout);
}

void parse_checkpoint(const Section& root, JobSpec& job) {
  if (!root.has("checkpoint")) return;
  const Section c = root.section("checkpoint");
  c.allow({"dir", "interval", "resume", "keep", "shared"});
  job.checkpoint.dir = c.required_string("dir");
  if (job.checkpoint.dir.empty()) c.fail("checkpoint.dir", "must not be empty");
  job.checkpoint.interval = static_cast<int>(c.integer("interval", 0, 0, kIntMax));
  job.checkpoint.resume = c.boolean("resume", false);
  job.checkpoint.keep = static_cast<int>(c.integer("keep", job.checkpoint.keep, 1, kIntMax));
  job.checkpoint.shared = c.boolean("shared", job.checkpoint.shared);
}

void parse_trace(const Section& root, JobSpec& job) {
  if (!root.has("trace")) return;
  const Section t = root.section("trace");
  t.allow({"path"});
  job.trace_path = t.required_string("path");
  if (job.trace_path.empty()) t.fail("trace.path", "must not be empty");
}

// A file the stage reads (a token, a CA): 1 to kMaxJobFilePath characters, no NUL.
std::string file_path(const Section& s, const std::string& key) {
  const std::string path = s.required_string(key);
  if (const std::string why = placement::job_file_path_violation(path); !why.empty()) {
    s.fail(s.field(key), why);
  }
  return path;
}

void parse_progress(const Section& root, JobSpec& job) {
  if (!root.has("progress")) return;
  const Section p = root.section("progress");
  p.allow({"address", "token_file", "ca_file"});
  job.progress_address = p.required_string("address");
  if (!placement::is_host_port(job.progress_address)) {
    p.fail("progress.address", "expected host:port, got '" + job.progress_address + "'");
  }
  if (p.has("token_file")) job.progress_token_file = file_path(p, "token_file");
  if (p.has("ca_file")) job.progress_ca_file = file_path(p, "ca_file");
}

void parse_rendezvous(const Section& root, JobSpec& job) {
  if (!root.has("rendezvous")) return;
  const Section r = root.section("rendezvous");
  r.allow({"address", "token_file", "advertise_env", "ca_file"});
  RendezvousSpec spec;
  spec.address = r.required_string("address");
  if (!placement::is_host_port(spec.address)) {
    r.fail("rendezvous.address", "expected host:port, got '" + spec.address + "'");
  }
  spec.token_file = file_path(r, "token_file");
  if (r.has("ca_file")) spec.ca_file = file_path(r, "ca_file");
  if (r.has("advertise_env")) {
    spec.advertise_env = r.required_string("advertise_env");
    if (!placement::is_env_var_name(spec.advertise_env)) {
      r.fail("rendezvous.advertise_env",
             "expected an environment variable's name, got '" + spec.advertise_env + "'");
    }
  }
  job.rendezvous = std::move(spec);
}

}  // namespace

JobSpec parse_job_spec(const std::string& text, const std::string& source) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    throw ConfigError(source + ": not valid JSON: " + e.what());
  }
  const Section root(document, "", source);
  root.allow({"format_version", "job_id", "workload", "training", "data", "schedule", "pipeline",
              "ranks", "links", "timeouts", "checkpoint", "trace", "progress", "rendezvous",
              "data_parallel"});
  const int64_t version = root.integer("format_version", 1, 0, kIntMax);
  if (version != 1) root.fail("format_version", "unsupported version " + std::to_string(version));
  JobSpec job;
  job.job_id = root.unsigned_integer("job_id", 1);
  parse_workload(root, source, job);
  parse_training(root, job);
  parse_data_parallel(root, job);
  parse_data(root, job);
  parse_schedule(root, job);
  parse_pipeline(root, job);
  parse_rendezvous(root, job);
  parse_ranks(root, source, job);
  parse_links(root, source, job);
  parse_timeouts(root, job);
  parse_checkpoint(root, job);
  parse_trace(root, job);
  parse_progress(root, job);
  try {
    job.training.validate();
    job.layout.validate(job.model);
  } catch (const ConfigError& e) {
    throw ConfigError(source + ": " + e.what());
  }
  try {
    placement::validate_schedule_spec({job.training.schedule, job.layout.stages,
                                       job.training.micro_batches, job.layout.chunks,
                                       job.training.microbatch_group});
  } catch (const std::invalid_argument& e) {
    throw ConfigError(source + ": schedule: " + e.what());
  }
  return job;
}

JobSpec load_job_spec(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open the job file");
  std::stringstream text;
  text << in.rdbuf();
  JobSpec job = parse_job_spec(text.str(), path);
  // Credentials shipped beside the job file (a pod's mounted Secret next to its ConfigMap) are
  // named relative to it. Joined lexically: the job file's folder may be a symlink.
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const auto beside = [&](std::string& file) {
    if (!file.empty() && file.front() != '/') file = (folder / file).lexically_normal().string();
  };
  if (job.rendezvous) {
    beside(job.rendezvous->token_file);
    beside(job.rendezvous->ca_file);
  }
  beside(job.progress_token_file);
  beside(job.progress_ca_file);
  return job;
}

std::string trace_path_for(const JobSpec& job, int rank) {
  std::string path = job.trace_path;
  const std::string placeholder = "{rank}";
  for (size_t at = path.find(placeholder); at != std::string::npos; at = path.find(placeholder)) {
    path.replace(at, placeholder.size(), std::to_string(rank));
  }
  return path;
}

TokenCorpus load_corpus(const DataSpec& data, int vocab) {
  if (data.kind == DataSpec::Kind::kText) return TokenCorpus::from_file(data.path, vocab);
  return TokenCorpus::synthetic(data.seed, data.bytes, vocab);
}

}  // namespace tessel::stage
