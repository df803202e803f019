#include "api/trainingjob.h"

#include <map>

#include "api/crds.h"
#include "api/pod_template.h"
#include "api/yaml_json.h"
#include "placement/limits.h"
#include "placement/sync_period.h"

namespace tessel::api {
namespace {

using nlohmann::json;

constexpr const char* kApiVersion = "tessel.dev/v1alpha1";

std::string str(int64_t value) { return std::to_string(value); }

// metadata.name and metadata.namespace: DNS-1123 labels (the name also short, see the header).
void check_metadata(const json& object, std::vector<FieldError>& errors) {
  if (object.value("apiVersion", json()) != kApiVersion) {
    errors.push_back({"apiVersion", "must be " + std::string(kApiVersion) + ", got " +
                                        object.value("apiVersion", json()).dump()});
  }
  if (object.value("kind", json()) != "TrainingJob") {
    errors.push_back({"kind", "must be TrainingJob, got " + object.value("kind", json()).dump()});
  }
  const json metadata = object.value("metadata", json::object());
  if (!metadata.is_object()) {
    errors.push_back({"metadata", "must be an object"});
    return;
  }
  const json name = metadata.value("name", json());
  if (!name.is_string() || name.get<std::string>().empty()) {
    errors.push_back({"metadata.name", "required"});
  } else if (const std::string why = placement::dns1123_label_violation(name); !why.empty()) {
    errors.push_back({"metadata.name", why});
  } else if (name.get_ref<const std::string&>().size() > kMaxJobNameLength) {
    errors.push_back(
        {"metadata.name", "must be at most " + std::to_string(kMaxJobNameLength) +
                              " characters (pod names are derived from it), got " +
                              std::to_string(name.get_ref<const std::string&>().size())});
  }
  if (metadata.contains("namespace")) {
    const json ns = metadata["namespace"];
    if (!ns.is_string()) {
      errors.push_back({"metadata.namespace", "must be a string, got " + ns.dump()});
    } else if (const std::string why = placement::dns1123_label_violation(ns); !why.empty()) {
      errors.push_back({"metadata.namespace", why});
    }
  }
}

// A Workload::validate message "spec.model: seq_len: must be ..." as a field error.
FieldError workload_error(const std::string& message) {
  static const std::map<std::string, std::string> fields = {
      {"layers", "spec.model.layers"},          {"hidden", "spec.model.hidden"},
      {"ffn_hidden", "spec.model.ffnHidden"},   {"heads", "spec.model.heads"},
      {"seq_len", "spec.model.seqLen"},         {"vocab", "spec.model.vocab"},
      {"micro_batch", "spec.batch.microBatch"}, {"global_batch", "spec.batch.globalBatch"}};
  const std::string prefix = "spec.model: ";
  if (message.rfind(prefix, 0) == 0) {
    const size_t end = message.find(": ", prefix.size());
    if (end != std::string::npos) {
      const auto it = fields.find(message.substr(prefix.size(), end - prefix.size()));
      if (it != fields.end()) return {it->second, message.substr(end + 2)};
    }
  }
  return {"spec.model", message};
}

ModelSpec read_model(const json& m) {
  ModelSpec model;
  model.preset = m.value("preset", "");
  model.layers = m.value("layers", 0);
  model.hidden = m.value("hidden", 0);
  model.ffn_hidden = m.value("ffnHidden", 0);
  model.heads = m.value("heads", 0);
  model.seq_len = m.value("seqLen", 0);
  model.vocab = m.value("vocab", model.preset.empty() ? 256 : 0);  // 0: the preset's
  if (m.contains("precision")) model.precision = placement::parse_precision(m["precision"]);
  model.recompute_activations = m.value("recomputeActivations", false);
  return model;
}

DataParallelSpec read_data_parallel(const json& d) {
  DataParallelSpec out;
  out.mode = placement::parse_data_parallel_kind(d.value("mode", "synchronous"));
  if (d.contains("syncEvery")) out.sync_every = d["syncEvery"].get<int>();
  if (d.contains("deltaBits")) out.delta_bits = d["deltaBits"].get<int>();
  out.outer_learning_rate = d.value("outerLearningRate", out.outer_learning_rate);
  out.outer_momentum = d.value("outerMomentum", out.outer_momentum);
  out.nesterov = d.value("nesterov", out.nesterov);
  out.delayed = d.value("delayed", out.delayed);
  out.stagger = d.value("stagger", out.stagger);
  return out;
}

TrainingJobSpec read_spec(const json& s) {
  TrainingJobSpec spec;
  spec.model = read_model(s.at("model"));
  const json& p = s.at("parallelism");
  spec.parallelism.stages = p.at("stages");
  spec.parallelism.replicas = p.at("replicas");
  spec.parallelism.virtual_stages = p.value("virtualStages", 1);
  spec.parallelism.schedule = placement::parse_schedule_kind(p.value("schedule", "1f1b"));
  spec.parallelism.microbatch_group = p.value("microbatchGroup", 0);
  spec.parallelism.overlap = p.value("overlap", true);
  spec.micro_batch = s.at("batch").at("microBatch");
  spec.global_batch = s.at("batch").at("globalBatch");
  const json& t = s.at("training");
  TrainingSpec& training = spec.training;
  training.steps = t.at("steps");
  training.learning_rate = t.value("learningRate", training.learning_rate);
  training.weight_decay = t.value("weightDecay", training.weight_decay);
  training.beta1 = t.value("beta1", training.beta1);
  training.beta2 = t.value("beta2", training.beta2);
  training.eps = t.value("eps", training.eps);
  training.grad_clip = t.value("gradClip", training.grad_clip);
  training.seed = t.value("seed", training.seed);
  if (t.contains("threads")) training.threads = t["threads"].get<int>();
  spec.data_parallel = read_data_parallel(s.value("dataParallel", json::object()));
  const json& d = s.at("data");
  if (d.contains("text")) spec.data.text_path = d["text"].at("path");
  if (d.contains("synthetic")) {
    spec.data.synthetic = true;
    spec.data.synthetic_seed = d["synthetic"].value("seed", uint64_t{1});
    spec.data.synthetic_bytes = d["synthetic"].value("bytes", int64_t{1} << 20);
  }
  spec.pod_template = s.value("template", json::object());
  const json pl = s.value("placement", json::object());
  spec.placement.strategy = placement::parse_strategy(pl.value("strategy", "evolutionary"));
  spec.placement.evaluations = pl.value("evaluations", spec.placement.evaluations);
  spec.placement.seed = pl.value("seed", spec.placement.seed);
  spec.placement.cost_model = pl.value("costModel", "full");
  spec.placement.cluster_selector =
      LabelSelector::from_json(pl.value("clusterSelector", json::object()));
  spec.placement.gpu_selector = LabelSelector::from_json(pl.value("gpuSelector", json::object()));
  const json c = s.value("checkpoint", json::object());
  spec.checkpoint.interval_steps = c.value("intervalSteps", int64_t{0});
  spec.checkpoint.keep = c.value("keep", 3);
  spec.checkpoint.path = c.value("path", "");
  const json f = s.value("failurePolicy", json::object());
  spec.failure_policy.max_restarts = f.value("maxRestarts", 3);
  spec.failure_policy.backoff_seconds = f.value("backoffSeconds", 10);
  spec.failure_policy.start_timeout_seconds = f.value("startTimeoutSeconds", 600);
  if (s.contains("elastic")) spec.elastic = ElasticSpec{s["elastic"].at("minReplicas").get<int>()};
  const json n = s.value("network", json::object());
  spec.network.host_network = n.value("mode", "PodNetwork") == "HostNetwork";
  spec.network.connect_timeout_s = n.value("connectTimeoutSeconds", 60.0);
  spec.network.io_timeout_s = n.value("ioTimeoutSeconds", 120.0);
  spec.suspend = s.value("suspend", false);
  spec.managed_by = s.value("managedBy", spec.managed_by);
  return spec;
}

void check_selector(const LabelSelector& selector, const std::string& path,
                    std::vector<FieldError>& errors) {
  for (size_t i = 0; i < selector.match_expressions.size(); ++i) {
    const LabelRequirement& r = selector.match_expressions[i];
    const std::string at = path + ".matchExpressions[" + std::to_string(i) + "].values";
    const bool set_operator = r.op == "In" || r.op == "NotIn";
    if (set_operator && r.values.empty()) errors.push_back({at, "must be non-empty for " + r.op});
    if (!set_operator && !r.values.empty()) errors.push_back({at, "must be empty for " + r.op});
  }
}

// spec.dataParallel's fields besides mode are read by the low-communication mode only. Beside
// mode synchronous they are refused, each named: a job that set syncEvery but not the mode would
// otherwise run synchronous without a word (job.json and the local job file refuse them alike).
void check_data_parallel(const json& spec_json, std::vector<FieldError>& errors) {
  const json d = spec_json.value("dataParallel", json::object());
  if (d.value("mode", "synchronous") != "synchronous") return;
  for (const auto& [field, value] : d.items()) {
    if (field == "mode") continue;
    errors.push_back({"spec.dataParallel." + field,
                      "applies to mode low-communication only; spec.dataParallel.mode is "
                      "synchronous"});
  }
}

// The rules across fields, on a schema-valid, defaulted spec.
void check_rules(const json& spec_json, std::vector<FieldError>& errors) {
  const json& data = spec_json.at("data");
  if (data.contains("text") == data.contains("synthetic")) {
    errors.push_back({"spec.data", "give exactly one of text (a file of bytes) or synthetic"});
  }
  const std::vector<FieldError> pod_template =
      pod_template_errors(spec_json.value("template", json::object()));
  errors.insert(errors.end(), pod_template.begin(), pod_template.end());
  check_data_parallel(spec_json, errors);
  const json& model = spec_json.at("model");
  if (!model.contains("preset")) {
    for (const char* field : {"layers", "hidden", "heads", "seqLen"}) {
      if (!model.contains(field))
        errors.push_back({std::string("spec.model.") + field, "required when no preset is given"});
    }
  }
  if (!errors.empty()) return;
  const TrainingJobSpec spec = read_spec(spec_json);
  const ParallelismSpec& p = spec.parallelism;
  placement::Workload workload;
  try {
    workload = spec.workload();
  } catch (const placement::WorkloadError& e) {
    errors.push_back(workload_error(e.what()));
    return;
  }
  const bool interleaved = p.schedule == placement::ScheduleKind::Interleaved;
  if (interleaved && p.virtual_stages < 2) {
    errors.push_back({"spec.parallelism.virtualStages",
                      "the interleaved schedule needs 2 or more, got " + str(p.virtual_stages)});
  }
  if (!interleaved && p.virtual_stages != 1) {
    errors.push_back(
        {"spec.parallelism.virtualStages",
         "only the interleaved schedule has more than 1, got " + str(p.virtual_stages)});
  }
  if (!interleaved && p.microbatch_group != 0) {
    errors.push_back(
        {"spec.parallelism.microbatchGroup", "applies to the interleaved schedule only"});
  }
  const int64_t virtual_stages = int64_t{p.stages} * p.virtual_stages;
  if (virtual_stages > workload.layers) {
    errors.push_back({"spec.parallelism.stages", "stages x virtualStages = " + str(p.stages) +
                                                     " x " + str(p.virtual_stages) + " = " +
                                                     str(virtual_stages) + " exceeds the model's " +
                                                     str(workload.layers) + " layers"});
  }
  const int64_t per_step = int64_t{p.replicas} * spec.micro_batch;
  if (spec.global_batch % per_step != 0) {
    errors.push_back({"spec.batch.globalBatch",
                      str(spec.global_batch) + " is not a multiple of replicas x microBatch = " +
                          str(p.replicas) + " x " + str(spec.micro_batch) + " = " + str(per_step)});
  } else if (errors.empty()) {
    try {
      placement::validate_schedule_spec({p.schedule, p.stages,
                                         static_cast<int>(spec.global_batch / per_step),
                                         p.virtual_stages, p.microbatch_group});
    } catch (const std::invalid_argument& e) {
      errors.push_back({"spec.parallelism", e.what()});
    }
  }
  if (spec.elastic && spec.elastic->min_replicas > p.replicas) {
    errors.push_back({"spec.elastic.minReplicas", str(spec.elastic->min_replicas) +
                                                      " exceeds spec.parallelism.replicas " +
                                                      str(p.replicas) + " (the job's full width)"});
  }
  if (!spec.data.text_path.empty() && spec.data.text_path.find('\0') != std::string::npos) {
    errors.push_back({"spec.data.text.path", "contains a NUL character"});
  }
  check_selector(spec.placement.cluster_selector, "spec.placement.clusterSelector", errors);
  check_selector(spec.placement.gpu_selector, "spec.placement.gpuSelector", errors);
}

// spec.dataParallel.mode may not change while the job has pods (they may be writing a checkpoint)
// nor once it has a checkpoint: the stage refuses to resume a checkpoint of the other mode
// (noderuntime/stage/checkpoint_outer_state.h), so the job's next start would fail.
void check_mode_change(const json& old_object, const json& old_spec, const json& new_spec,
                       const std::string& phase, std::vector<FieldError>& errors) {
  const auto mode = [](const json& spec) {
    return spec.value("dataParallel", json::object()).value("mode", json("synchronous"));
  };
  if (mode(old_spec) == mode(new_spec)) return;
  const std::string change =
      "cannot change from " + mode(old_spec).dump() + " to " + mode(new_spec).dump();
  const json progress = old_object.value("status", json::object()).value("progress", json());
  if (progress.is_object() && progress.contains("lastCheckpointStep")) {
    errors.push_back(
        {"spec.dataParallel.mode",
         change + ": the job has a checkpoint (step " + progress["lastCheckpointStep"].dump() +
             ") that a job of the other mode cannot resume; create a new TrainingJob"});
  } else if (phase == "Starting" || phase == "Running") {
    errors.push_back({"spec.dataParallel.mode",
                      change + " while the job is " + phase +
                          " (its stages may be writing a checkpoint of the current mode)"});
  }
}

}  // namespace

placement::Workload TrainingJobSpec::workload() const {
  placement::Workload w;
  if (!model.preset.empty()) w = placement::workload_preset(model.preset);
  if (model.layers) w.layers = model.layers;
  if (model.hidden) w.hidden = model.hidden;
  if (model.ffn_hidden) w.ffn_hidden = model.ffn_hidden;
  if (model.heads) w.heads = model.heads;
  if (model.seq_len) w.seq_len = model.seq_len;
  if (model.vocab) w.vocab = model.vocab;
  w.precision = model.precision.value_or(placement::Precision::FP32);
  w.recompute_activations = model.recompute_activations;
  w.micro_batch = micro_batch;
  w.global_batch = global_batch;
  if (data_parallel.low_communication()) {  // H and bits as given, else the planner's to choose
    placement::DataParallelMode& m = w.data_parallel;
    m = placement::low_communication_chosen();
    m.choose_sync_every = !data_parallel.sync_every;
    m.sync_every = data_parallel.sync_every.value_or(m.sync_every);
    m.choose_delta_bits = !data_parallel.delta_bits;
    m.delta_bits = data_parallel.delta_bits.value_or(m.delta_bits);
    m.delayed = data_parallel.delayed;
  }
  w.validate("spec.model");
  return w;
}

std::vector<int> TrainingJobSpec::usable_widths() const {
  std::vector<int> widths = {parallelism.replicas};
  if (!elastic) return widths;
  for (int width = parallelism.replicas - 1; width >= std::max(1, elastic->min_replicas); --width) {
    const int64_t per_step = int64_t{width} * micro_batch;
    if (global_batch % per_step != 0) continue;
    try {
      placement::validate_schedule_spec({parallelism.schedule, parallelism.stages,
                                         static_cast<int>(global_batch / per_step),
                                         parallelism.virtual_stages, parallelism.microbatch_group});
    } catch (const std::invalid_argument&) {
      continue;  // the schedule cannot run that many micro-batches per replica
    }
    widths.push_back(width);
  }
  return widths;
}

std::vector<FieldError> trainingjob_errors(json& object) {
  if (!object.is_object()) return {{"", "a TrainingJob must be an object"}};
  std::vector<FieldError> errors;
  check_metadata(object, errors);
  if (object.contains("spec") && object["spec"].is_object())
    trainingjob_schema().apply_defaults(object);
  const std::vector<FieldError> schema = trainingjob_schema().validate(object);
  errors.insert(errors.end(), schema.begin(), schema.end());
  if (!object.contains("spec")) errors.push_back({"spec", "required"});
  if (errors.empty()) check_rules(object["spec"], errors);
  return errors;
}

std::vector<FieldError> trainingjob_update_errors(const json& old_object, const json& new_object) {
  std::vector<FieldError> errors;
  const std::string phase = old_object.value("status", json::object()).value("phase", "");
  const json old_spec = old_object.value("spec", json::object());
  const json new_spec = new_object.value("spec", json::object());
  check_mode_change(old_object, old_spec, new_spec, phase, errors);
  const bool has_pods = phase == "Starting" || phase == "Running";
  if (!has_pods) return errors;
  for (const char* section : {"model", "parallelism", "batch", "data"}) {
    if (old_spec.value(section, json()) != new_spec.value(section, json())) {
      errors.push_back(
          {std::string("spec.") + section, "cannot change while the job is " + phase +
                                               "; set spec.suspend: true first, then change it"});
    }
  }
  return errors;
}

TrainingJob parse_trainingjob(json object, const std::string& source) {
  const std::vector<FieldError> errors = trainingjob_errors(object);
  if (!errors.empty()) throw ManifestError(source, errors);
  TrainingJob job;
  job.name = object["metadata"]["name"];
  job.namespace_name = object["metadata"].value("namespace", "");
  job.generation = object["metadata"].value("generation", int64_t{0});
  job.spec = read_spec(object["spec"]);
  job.object = std::move(object);
  return job;
}

TrainingJob load_trainingjob_file(const std::string& path) {
  std::string why;
  const std::optional<std::string> text =
      placement::read_file_bounded(path, kMaxManifestBytes, &why);
  if (!text) throw ManifestError(path, {{"", why}});
  return parse_trainingjob(yaml_to_json(*text, path), path);
}

bool is_trainingjob_manifest(const json& document) {
  return document.is_object() && document.value("kind", json()) == "TrainingJob";
}

}  // namespace tessel::api
