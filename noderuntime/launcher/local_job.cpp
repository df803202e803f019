#include "noderuntime/launcher/local_job.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "placement/limits.h"
#include "placement/schedule.h"
#include "placement/sync_period.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxScale = 1e6;

std::string resolve(const std::string& path, const std::string& base_dir) {
  const fs::path p(path);
  return p.is_absolute() || base_dir.empty() ? path : (fs::path(base_dir) / p).string();
}

// A link's bandwidth: > 0 as every rate, then within the physical bounds of a link
// (placement/limits.h): 1 kbit/s to 100 Tbit/s.
double link_bandwidth(const YamlFields& fields, const std::string& key, double fallback) {
  const double value = fields.number(key, fallback, 0, placement::kMaxBandwidthGbps, true);
  if (value < placement::kMinBandwidthGbps) {
    fields.fail(fields.field(key), "must be at least " +
                                       placement::number_text(placement::kMinBandwidthGbps) +
                                       " Gbit/s (1 kbit/s), got " + placement::number_text(value));
  }
  return value;
}

void parse_topology(const YamlFields& root, const std::string& base_dir, LocalJob& job) {
  const YamlFields t = root.section("topology");
  t.allow({"file", "generate", "bandwidth_scale", "latency_scale"});
  if (t.has("file") == t.has("generate")) {
    t.fail(t.path(), "give exactly one of file (a topology YAML) or generate");
  }
  if (t.has("file")) {
    job.topology.file = resolve(t.required_text("file"), base_dir);
  } else {
    const YamlFields g = t.section("generate");
    g.allow({"sites", "seed", "min_bandwidth_gbps", "max_bandwidth_gbps",
             "intra_site_bandwidth_gbps", "intra_site_latency_ms"});
    placement::GeoTopologySpec spec;
    spec.sites = static_cast<int>(g.integer("sites", 2, 1, placement::kMaxSites));
    spec.seed = g.unsigned_integer("seed", spec.seed);
    spec.min_bandwidth_gbps = link_bandwidth(g, "min_bandwidth_gbps", spec.min_bandwidth_gbps);
    spec.max_bandwidth_gbps = link_bandwidth(g, "max_bandwidth_gbps", spec.max_bandwidth_gbps);
    if (spec.max_bandwidth_gbps < spec.min_bandwidth_gbps) {
      g.fail(g.field("max_bandwidth_gbps"),
             "must be >= min_bandwidth_gbps (" + placement::number_text(spec.min_bandwidth_gbps) +
                 "), got " + placement::number_text(spec.max_bandwidth_gbps));
    }
    spec.intra_site_bandwidth_gbps =
        link_bandwidth(g, "intra_site_bandwidth_gbps", spec.intra_site_bandwidth_gbps);
    spec.intra_site_latency_ms =
        g.number("intra_site_latency_ms", spec.intra_site_latency_ms, 0, placement::kMaxLatencyMs);
    spec.mixed_gpus = false;
    job.topology.generate = spec;
  }
  // A million times either way; the scaled links must still lie within the physical bounds
  // (Topology::finalize checks them after scaling).
  job.topology.bandwidth_scale = t.number("bandwidth_scale", 1, 0, kMaxScale, true);
  job.topology.latency_scale = t.number("latency_scale", 1, 0, kMaxScale);
}

// Workload::validate names its fields bare ("src: heads: ..."); in a job file they live under
// model. or training.: put the section in front so the message names the field as written.
std::string with_section(const std::string& message, const std::string& source) {
  const std::string prefix = source + ": ";
  if (message.rfind(prefix, 0) != 0) return message;
  const size_t end = message.find(": ", prefix.size());
  if (end == std::string::npos) return message;
  const std::string field = message.substr(prefix.size(), end - prefix.size());
  if (field.find_first_of(". ") != std::string::npos) return message;
  const bool batch = field == "micro_batch" || field == "global_batch";
  return prefix + (batch ? "training." : "model.") + message.substr(prefix.size());
}

// The model section is the workload's model section (placement/workload.h), so a model file of
// examples/models/ pastes in; the batch comes from the training section. Unlike a workload
// file, precision defaults to fp32 and vocab to 256 (byte-level tokens); fp32 and bf16 are
// trained (local_precision_problem).
void parse_model(const YamlFields& root, const YamlFields& training, LocalJob& job) {
  const YamlFields m = root.section("model");
  m.allow({"preset", "name", "layers", "hidden", "ffn_hidden", "heads", "seq_len", "vocab",
           "precision", "recompute_activations"});
  if (m.has("recompute_activations") && m.boolean("recompute_activations", false)) {
    m.fail("model.recompute_activations",
           "the CPU stage runtime keeps its activations; set false or leave out");
  }
  YAML::Node workload;
  YAML::Node model = YAML::Clone(root.node("model"));
  if (m.has("preset")) {
    workload["preset"] = m.required_text("preset");
    model.remove("preset");
  } else if (!m.has("vocab")) {
    model["vocab"] = 256;
  }
  if (!m.has("precision")) model["precision"] = "fp32";
  model["recompute_activations"] = false;
  workload["model"] = model;
  workload["training"]["micro_batch"] =
      training.required_integer("micro_batch", 1, placement::kMaxMicroBatch);
  workload["training"]["global_batch"] =
      training.required_integer("global_batch", 1, placement::kMaxGlobalBatch);
  try {
    job.workload = placement::parse_workload_yaml(YAML::Dump(workload), m.source());
  } catch (const placement::WorkloadError& e) {
    throw LocalJobError(with_section(e.what(), m.source()));
  }
  if (const std::string why = local_precision_problem(job.workload.precision); !why.empty()) {
    m.fail("model.precision", why);
  }
  if (job.workload.vocab < 256) {
    m.fail("model.vocab", "tokens are bytes: the vocabulary needs at least 256 entries, got " +
                              std::to_string(job.workload.vocab));
  }
}

void parse_training(const YamlFields& t, LocalJob& job) {
  t.allow({"steps", "micro_batch", "global_batch", "learning_rate", "weight_decay", "beta1",
           "beta2", "eps", "grad_clip", "seed", "threads", "optimizer"});
  LocalTraining& o = job.training;
  o.steps = static_cast<int>(t.required_integer("steps", 1, placement::kMaxSteps));
  o.learning_rate = t.number("learning_rate", o.learning_rate, 0, 1, true);
  o.weight_decay = t.number("weight_decay", o.weight_decay, 0, 1);
  o.beta1 = t.number("beta1", o.beta1, 0, 1);
  o.beta2 = t.number("beta2", o.beta2, 0, 1);
  o.eps = t.number("eps", o.eps, 0, 1, true);
  o.grad_clip = t.number("grad_clip", o.grad_clip, 0, kInf);
  o.seed = t.unsigned_integer("seed", o.seed);
  o.threads = static_cast<int>(t.integer("threads", o.threads, 1, 256));
  try {
    o.optimizer = stage::parse_inner_optimizer(t.text("optimizer", "adamw"));
  } catch (const std::invalid_argument& e) {
    t.fail("training.optimizer", e.what());
  }
}

// data_parallel: job.json's section, written in YAML (noderuntime/stage/job_spec.h), except that
// sync_every and delta_bits left out (or auto) are the planner's to choose for the placement the
// job runs (local_plan.h), as `tessel plan` chooses them; sync_overhead is the planner's
// tolerance for H then (placement/sync_period.h).
void parse_data_parallel(const YamlFields& root, LocalJob& job) {
  if (!root.has("data_parallel")) return;
  const YamlFields d = root.section("data_parallel");
  const std::string mode = d.required_text("mode");
  if (mode == "synchronous") {
    d.allow({"mode"});
    return;
  }
  if (mode != stage::kLowCommunicationMode) {
    d.fail("data_parallel.mode",
           "must be \"synchronous\" or \"low-communication\", got \"" + mode + "\"");
  }
  d.allow({"mode", "sync_every", "delta_bits", "sync_overhead", "outer_learning_rate",
           "outer_momentum", "nesterov", "delayed", "stagger"});
  const auto chosen = [&d](const std::string& key) {
    return !d.has(key) || (d.node(key).IsScalar() && d.node(key).Scalar() == "auto");
  };
  stage::LowCommunication& l = job.data_parallel;
  // What the cost model and the simulator price (placement/data_parallel_mode.h).
  placement::DataParallelMode& m = job.workload.data_parallel;
  m = placement::low_communication_chosen();
  l.enabled = true;
  m.choose_sync_every = chosen("sync_every");
  if (!m.choose_sync_every) {
    l.sync_every = static_cast<int>(d.integer("sync_every", l.sync_every, 1, stage::kMaxSyncEvery));
    m.sync_every = l.sync_every;
  }
  m.choose_delta_bits = chosen("delta_bits");
  if (!m.choose_delta_bits) {
    l.delta_bits = static_cast<int>(d.integer("delta_bits", l.delta_bits, 4, 32));
    if (l.delta_bits != 32 && l.delta_bits != 8 && l.delta_bits != 4) {
      d.fail("data_parallel.delta_bits",
             "must be 32, 8, 4 or auto, got " + std::to_string(l.delta_bits));
    }
    m.delta_bits = l.delta_bits;
  }
  if (d.has("sync_overhead") && !m.choose_sync_every) {
    d.fail("data_parallel.sync_overhead",
           "is the planner's tolerance for H; it applies only when sync_every is auto or left "
           "out, got sync_every " +
               std::to_string(l.sync_every));
  }
  m.sync_overhead = d.number("sync_overhead", placement::kDefaultSyncOverhead, 0,
                             placement::kMaxSyncOverhead, true);
  l.outer_learning_rate =
      static_cast<float>(d.number("outer_learning_rate", l.outer_learning_rate, 0, kInf, true));
  l.outer_momentum = static_cast<float>(d.number("outer_momentum", l.outer_momentum, 0, 1));
  if (l.outer_momentum >= 1) d.fail("data_parallel.outer_momentum", "must be below 1, got 1");
  l.nesterov = d.boolean("nesterov", l.nesterov);
  l.delayed = d.boolean("delayed", l.delayed);
  l.stagger = d.boolean("stagger", l.stagger);
  l.final_step = job.training.steps;
  m.delayed = l.delayed;
}

void parse_data(const YamlFields& root, const std::string& base_dir, LocalJob& job) {
  const YamlFields d = root.section("data");
  d.allow({"text", "synthetic"});
  if (d.has("text") == d.has("synthetic")) {
    d.fail("data", "give exactly one of text (a file of bytes) or synthetic");
  }
  if (d.has("text")) {
    job.data.kind = stage::DataSpec::Kind::kText;
    job.data.path = resolve(d.required_text("text"), base_dir);
    if (const std::string why = text_data_problem(job.data.path); !why.empty()) {
      d.fail("data.text", why);
    }
    return;
  }
  const YamlFields s = d.section("synthetic");
  s.allow({"seed", "bytes"});
  job.data.kind = stage::DataSpec::Kind::kSynthetic;
  job.data.seed = s.unsigned_integer("seed", 1);
  job.data.bytes = s.integer("bytes", 1 << 20, 2, static_cast<int64_t>(placement::kMaxTextBytes));
}

void parse_schedule(const YamlFields& root, LocalJob& job) {
  if (!root.has("schedule")) return;
  const YamlFields s = root.section("schedule");
  s.allow({"kind", "chunks", "microbatch_group", "overlap"});
  try {
    job.schedule.kind = placement::parse_schedule_kind(s.text("kind", "1f1b"));
  } catch (const std::invalid_argument& e) {
    s.fail("schedule.kind", e.what());
  }
  const bool interleaved = job.schedule.kind == placement::ScheduleKind::Interleaved;
  job.schedule.chunks = static_cast<int>(s.integer("chunks", interleaved ? 2 : 1, 1, 64));
  if (interleaved && job.schedule.chunks < 2) {
    s.fail("schedule.chunks", "the interleaved schedule needs 2 or more chunks per stage");
  }
  if (!interleaved && job.schedule.chunks != 1) {
    s.fail("schedule.chunks", "only the interleaved schedule has more than one chunk per stage");
  }
  job.schedule.microbatch_group =
      static_cast<int>(s.integer("microbatch_group", 0, 0, placement::kMaxMicroBatches));
  job.schedule.overlap = s.boolean("overlap", true);
}

void parse_pipeline(const YamlFields& root, LocalJob& job) {
  const YamlFields p = root.section("pipeline");
  p.allow({"stages", "replicas"});
  const int virtual_per_stage = job.chunks();
  job.stages =
      static_cast<int>(p.required_integer("stages", 1, job.workload.layers / virtual_per_stage));
  job.replicas = static_cast<int>(p.required_integer("replicas", 1, 64));
  if (job.world_size() > 256) {
    p.fail("pipeline", "stages x replicas is " + std::to_string(job.world_size()) +
                           " processes; tessel local runs at most 256");
  }
  int micro_batches = 0;
  try {
    micro_batches = job.workload.micro_batches_per_replica(job.replicas);
  } catch (const placement::WorkloadError& e) {
    p.fail("training.global_batch", e.what());
  }
  try {
    placement::validate_schedule_spec({job.schedule.kind, job.stages, micro_batches,
                                       virtual_per_stage, job.schedule.microbatch_group});
  } catch (const std::invalid_argument& e) {
    p.fail("schedule", e.what());
  }
}

void parse_placement(const YamlFields& root, LocalJob& job) {
  if (!root.has("placement")) return;
  const YamlFields p = root.section("placement");
  p.allow({"strategy", "evaluations", "seed"});
  try {
    job.placement.strategy = placement::parse_strategy(p.text("strategy", "evolutionary"));
  } catch (const std::invalid_argument& e) {
    p.fail("placement.strategy", e.what());
  }
  job.placement.evaluations = static_cast<long>(
      p.integer("evaluations", job.placement.evaluations, 1, placement::kMaxSearchEvaluations));
  job.placement.seed = p.unsigned_integer("seed", job.placement.seed);
}

void parse_timeouts(const YamlFields& root, LocalJob& job) {
  if (!root.has("timeouts")) return;
  const YamlFields t = root.section("timeouts");
  t.allow({"connect_s", "io_s"});
  job.connect_timeout_s = t.number("connect_s", job.connect_timeout_s, 0, 86400, true);
  job.io_timeout_s = t.number("io_s", job.io_timeout_s, 0, 86400, true);
}

// The job's name becomes a folder (tessel-runs/<name>) and, under the operator, a Kubernetes
// object's name: a DNS-1123 label, whether written or taken from the file's name.
void parse_name(const YamlFields& root, const std::string& source, LocalJob& job) {
  if (root.has("name")) {
    job.name = root.required_text("name");
    if (const std::string why = placement::dns1123_label_violation(job.name); !why.empty()) {
      root.fail("name", why + ", got '" + job.name + "'");
    }
    return;
  }
  job.name = fs::path(source).stem().string();
  if (const std::string why = placement::dns1123_label_violation(job.name); !why.empty()) {
    root.fail("name", "not given, and the default, the job file's name '" + job.name +
                          "', is not a valid job name: it " + why + "; give name: explicitly");
  }
}

// The memory the stage processes need together, estimated before anything is started.
void check_memory(const YamlFields& root, const LocalJob& job) {
  const double bytes = estimate_local_job_memory(job);
  if (const std::string shortfall = placement::memory_shortfall(bytes); !shortfall.empty()) {
    root.fail("model", "the job's " + std::to_string(job.world_size()) +
                           " stage processes (parameters, gradients, Adam state, activations, "
                           "data) " +
                           shortfall);
  }
}

void parse_checkpoint(const YamlFields& root, LocalJob& job) {
  if (!root.has("checkpoint")) return;
  const YamlFields c = root.section("checkpoint");
  c.allow({"interval", "resume", "keep"});
  job.checkpoint_interval = static_cast<int>(c.integer("interval", 0, 0, kIntMax));
  job.resume = c.boolean("resume", false);
  job.checkpoint_keep = static_cast<int>(c.integer("keep", job.checkpoint_keep, 1, kIntMax));
}

}  // namespace

LocalJob parse_local_job(const std::string& text, const std::string& source,
                         const std::string& base_dir) {
  YAML::Node document;
  try {
    document = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw LocalJobError(source + ": line " + std::to_string(e.mark.line + 1) + ", column " +
                        std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  const YamlFields root(document, "", source);
  root.allow({"format_version", "name", "topology", "model", "training", "data", "schedule",
              "pipeline", "placement", "timeouts", "checkpoint", "data_parallel"});
  const int64_t version = root.integer("format_version", 1, 0, kIntMax);
  if (version != 1) root.fail("format_version", "unsupported version " + std::to_string(version));
  LocalJob job;
  job.source = source;
  parse_name(root, source, job);
  const YamlFields training = root.section("training");
  parse_training(training, job);
  parse_model(root, training, job);
  parse_data(root, base_dir, job);
  parse_schedule(root, job);
  parse_pipeline(root, job);
  parse_topology(root, base_dir, job);
  parse_placement(root, job);
  parse_timeouts(root, job);
  parse_checkpoint(root, job);
  parse_data_parallel(root, job);
  check_memory(root, job);
  return job;
}

std::string local_precision_problem(placement::Precision precision) {
  if (precision == placement::Precision::FP32 || precision == placement::Precision::BF16) {
    return "";
  }
  return std::string(
             "tessel local trains fp32 or bf16 (bf16 on a GPU, or in fp32 on the "
             "CPU), got ") +
         placement::to_string(precision);
}

std::string text_data_problem(const std::string& path) {
  // Each stage process that reads tokens loads the whole file: a regular file of at most
  // kMaxTextBytes (not /dev/zero, not a FIFO).
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return "cannot read '" + path + "': " + std::strerror(errno);
  }
  if (!S_ISREG(info.st_mode)) return "'" + path + "' is not a regular file";
  if (static_cast<uint64_t>(info.st_size) > placement::kMaxTextBytes) {
    return "'" + path + "' is " + placement::format_bytes(double(info.st_size)) +
           ", more than the limit of " + placement::format_bytes(double(placement::kMaxTextBytes));
  }
  if (!std::ifstream(path)) return "cannot read '" + path + "'";
  return "";
}

LocalJob load_local_job(const std::string& path) {
  std::string error;
  const std::optional<std::string> text =
      placement::read_file_bounded(path, placement::kMaxJobFileBytes, &error);
  if (!text) {
    const std::string open_failed = "cannot open: ";
    throw LocalJobError(path +
                        (error.rfind(open_failed, 0) == 0
                             ? ": cannot open the job file: " + error.substr(open_failed.size())
                             : ": cannot read the job file: " + error));
  }
  return parse_local_job(*text, path, fs::path(path).parent_path().string());
}

double estimate_local_job_memory(const LocalJob& job) {
  const placement::Workload& w = job.workload;
  const int p = job.stages, v = job.chunks();
  const double B = w.micro_batch, T = w.seq_len, C = w.hidden, F = w.ffn(), V = w.vocab,
               NH = w.heads;
  // Parameters: every layer, the token and position tables on the first stage, the tied
  // token table's copy on the last (p > 1); fp32 weights, gradients, Adam's m and v.
  const double parameters = double(w.total_parameters()) + (p > 1 ? V * C : 0.0);
  const double state = 16.0 * parameters;
  // One layer's stash per micro-batch in flight (noderuntime/stage/gpt_chunk.cpp): 8 BTC
  // (ln1, qkv, atty, residual2, ln2, residual3), 2 BTF, 4 BT, B NH T^2 attention weights.
  const double layer_stash = 4.0 * (B * T * (8 * C + 2 * F + 4) + B * NH * T * T);
  double activations = 0;
  int micro_batches = 1;
  try {
    micro_batches = w.micro_batches_per_replica(job.replicas);
  } catch (const placement::WorkloadError&) {
  }
  const placement::ScheduleSpec spec{job.schedule.kind, p, micro_batches, v,
                                     job.schedule.microbatch_group};
  const double layers_per_chunk = double(w.layers) / (double(p) * v);
  for (int rank = 0; rank < p; ++rank) {
    const int in_flight = std::min(placement::warmup_forwards(spec, rank) + 1, micro_batches * v);
    // The stash, the chunk's input and its gradient, and the scratch of one layer.
    activations += in_flight * (layers_per_chunk * layer_stash + 8.0 * B * T * C) +
                   4.0 * B * T * (6 * C + 2 * F);
  }
  // The head's logits on the last stage.
  activations += 4.0 * B * T * V;
  // The corpus, loaded by the processes that read tokens: first and last stage.
  double corpus = double(job.data.bytes);
  if (job.data.kind == stage::DataSpec::Kind::kText) {
    std::error_code error;
    corpus = double(fs::file_size(job.data.path, error));
    if (error) corpus = 0;
  }
  const double corpus_copies = p > 1 ? 2 : 1;
  return job.replicas * (state + activations + corpus_copies * corpus);
}

}  // namespace tessel::launcher
