#include "noderuntime/launcher/local_job.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "placement/schedule.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string resolve(const std::string& path, const std::string& base_dir) {
  const fs::path p(path);
  return p.is_absolute() || base_dir.empty() ? path : (fs::path(base_dir) / p).string();
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
    spec.sites = static_cast<int>(g.integer("sites", 2, 1, kIntMax));
    spec.seed = g.unsigned_integer("seed", spec.seed);
    spec.min_bandwidth_gbps =
        g.number("min_bandwidth_gbps", spec.min_bandwidth_gbps, 0, kInf, true);
    spec.max_bandwidth_gbps =
        g.number("max_bandwidth_gbps", spec.max_bandwidth_gbps, spec.min_bandwidth_gbps, kInf);
    spec.intra_site_bandwidth_gbps =
        g.number("intra_site_bandwidth_gbps", spec.intra_site_bandwidth_gbps, 0, kInf, true);
    spec.intra_site_latency_ms =
        g.number("intra_site_latency_ms", spec.intra_site_latency_ms, 0, kInf);
    spec.mixed_gpus = false;
    job.topology.generate = spec;
  }
  job.topology.bandwidth_scale = t.number("bandwidth_scale", 1, 0, kInf, true);
  job.topology.latency_scale = t.number("latency_scale", 1, 0, kInf);
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
// file, precision defaults to fp32 and vocab to 256 (byte-level tokens).
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
  workload["training"]["micro_batch"] = training.required_integer("micro_batch", 1, kIntMax);
  workload["training"]["global_batch"] = training.required_integer("global_batch", 1, kIntMax);
  try {
    job.workload = placement::parse_workload_yaml(YAML::Dump(workload), m.source());
  } catch (const placement::WorkloadError& e) {
    throw LocalJobError(with_section(e.what(), m.source()));
  }
  if (job.workload.precision != placement::Precision::FP32) {
    m.fail("model.precision", std::string("tessel local trains in fp32 on the CPU, got ") +
                                  placement::to_string(job.workload.precision));
  }
  if (job.workload.vocab < 256) {
    m.fail("model.vocab", "tokens are bytes: the vocabulary needs at least 256 entries, got " +
                              std::to_string(job.workload.vocab));
  }
}

void parse_training(const YamlFields& t, LocalJob& job) {
  t.allow({"steps", "micro_batch", "global_batch", "learning_rate", "weight_decay", "beta1",
           "beta2", "eps", "grad_clip", "seed", "threads"});
  LocalTraining& o = job.training;
  o.steps = static_cast<int>(t.required_integer("steps", 1, kIntMax));
  o.learning_rate = t.number("learning_rate", o.learning_rate, 0, 1, true);
  o.weight_decay = t.number("weight_decay", o.weight_decay, 0, 1);
  o.beta1 = t.number("beta1", o.beta1, 0, 1);
  o.beta2 = t.number("beta2", o.beta2, 0, 1);
  o.eps = t.number("eps", o.eps, 0, 1, true);
  o.grad_clip = t.number("grad_clip", o.grad_clip, 0, kInf);
  o.seed = t.unsigned_integer("seed", o.seed);
  o.threads = static_cast<int>(t.integer("threads", o.threads, 1, 256));
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
    if (!std::ifstream(job.data.path)) d.fail("data.text", "cannot read '" + job.data.path + "'");
    return;
  }
  const YamlFields s = d.section("synthetic");
  s.allow({"seed", "bytes"});
  job.data.kind = stage::DataSpec::Kind::kSynthetic;
  job.data.seed = s.unsigned_integer("seed", 1);
  job.data.bytes = s.integer("bytes", 1 << 20, 2, int64_t{1} << 40);
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
  job.schedule.microbatch_group = static_cast<int>(s.integer("microbatch_group", 0, 0, kIntMax));
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
  job.placement.evaluations =
      static_cast<long>(p.integer("evaluations", job.placement.evaluations, 1, int64_t{1} << 40));
  job.placement.seed = p.unsigned_integer("seed", job.placement.seed);
}

void parse_timeouts(const YamlFields& root, LocalJob& job) {
  if (!root.has("timeouts")) return;
  const YamlFields t = root.section("timeouts");
  t.allow({"connect_s", "io_s"});
  job.connect_timeout_s = t.number("connect_s", job.connect_timeout_s, 0, 86400, true);
  job.io_timeout_s = t.number("io_s", job.io_timeout_s, 0, 86400, true);
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
              "pipeline", "placement", "timeouts", "checkpoint"});
  const int64_t version = root.integer("format_version", 1, 0, kIntMax);
  if (version != 1) root.fail("format_version", "unsupported version " + std::to_string(version));
  LocalJob job;
  job.source = source;
  job.name = root.text("name", fs::path(source).stem().string());
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
  return job;
}

LocalJob load_local_job(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw LocalJobError(path + ": cannot open the job file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_local_job(text.str(), path, fs::path(path).parent_path().string());
}

}  // namespace tessel::launcher
