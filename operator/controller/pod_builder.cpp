#include "operator/controller/pod_builder.h"

#include <map>
#include <set>
#include <stdexcept>

#include "kube/base64.h"
#include "operator/controller/candidate_nodes.h"
#include "operator/controller/labels.h"

namespace tessel::controller {
namespace {

using nlohmann::json;

std::string str(int64_t n) { return std::to_string(n); }

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

bool is_alphanumeric(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// A mount path as the API server compares them (a trailing '/' does not make it another path).
std::string normalized_path(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The one GPU count a template may name: 1, as a number or a quantity string.
bool is_one_gpu(const json& quantity) {
  return (quantity.is_number_integer() && quantity.get<int64_t>() == 1) ||
         (quantity.is_string() && quantity.get<std::string>() == "1");
}

void check_resources(const json& resources, std::vector<api::FieldError>& errors) {
  for (const char* kind : {"requests", "limits"}) {
    const json list = resources.value(kind, json::object());
    if (!list.contains(kGpuResource) || is_one_gpu(list.at(kGpuResource))) continue;
    errors.push_back({std::string("spec.template.resources.") + kind + "[" + kGpuResource + "]",
                      "tessel gives every stage pod exactly 1 GPU, got " +
                          list.at(kGpuResource).dump() +
                          "; a job gets more GPUs from more stages or replicas"});
  }
}

void check_env(const json& env, std::vector<api::FieldError>& errors) {
  for (size_t i = 0; i < env.size(); ++i) {
    if (env[i].value("name", "") != kPodIpVariable) continue;
    errors.push_back({"spec.template.env[" + str(i) + "].name",
                      std::string(kPodIpVariable) +
                          " is set by tessel (the address the stage advertises to its peers) "
                          "and may not be overridden"});
  }
}

// Returns the names of the template's volumes.
std::set<std::string> check_volumes(const json& volumes, std::vector<api::FieldError>& errors) {
  std::map<std::string, size_t> first_index;
  for (size_t i = 0; i < volumes.size(); ++i) {
    const std::string name = volumes[i].value("name", "");
    const std::string field = "spec.template.volumes[" + str(i) + "].name";
    if (name == kJobFileVolume || name == kStageSecretVolume) {
      errors.push_back({field, quoted(name) + " is the name of a volume tessel adds (" +
                                   (name == kJobFileVolume ? "the job file" : "the job's token") +
                                   "); pick another"});
    } else if (const auto [it, inserted] = first_index.emplace(name, i); !inserted) {
      errors.push_back({field, quoted(name) + " is also the name of spec.template.volumes[" +
                                   str(it->second) + "]"});
    }
  }
  std::set<std::string> names;
  for (const auto& [name, index] : first_index) names.insert(name);
  return names;
}

void check_volume_mounts(const json& mounts, const std::set<std::string>& template_volumes,
                         std::vector<api::FieldError>& errors) {
  std::map<std::string, std::string> paths = {
      {kJobFileDirectory, std::string("tessel's job file (volume ") + kJobFileVolume + ")"},
      {kStageSecretDirectory, std::string("tessel's token (volume ") + kStageSecretVolume + ")"}};
  for (size_t i = 0; i < mounts.size(); ++i) {
    const std::string at = "spec.template.volumeMounts[" + str(i) + "]";
    const std::string name = mounts[i].value("name", "");
    if (!template_volumes.contains(name) && name != kJobFileVolume && name != kStageSecretVolume) {
      errors.push_back({at + ".name", quoted(name) + " names no volume of spec.template.volumes"});
    }
    const std::string path = normalized_path(mounts[i].value("mountPath", ""));
    if (const auto [it, inserted] = paths.emplace(path, at); !inserted) {
      errors.push_back({at + ".mountPath", quoted(path) + " is already the mount path of " +
                                               it->second + "; every mount needs its own path"});
    }
  }
}

void check_label_value(const std::string& value, const std::string& what) {
  const std::string why = value.empty() ? "is empty" : label_value_violation(value);
  if (!why.empty()) {
    throw std::invalid_argument(what + " " + quoted(value) +
                                " is not a usable label value: " + why);
  }
}

void check_input(const StageObjectsInput& input) {
  if (input.job == nullptr) throw std::invalid_argument("stage objects: no TrainingJob given");
  const api::TrainingJob& job = *input.job;
  const std::string of = " of TrainingJob " + job.namespace_name + "/" + job.name;
  if (job.namespace_name.empty())
    throw std::invalid_argument("stage objects" + of + ": no namespace");
  check_label_value(input.job_uid, "the uid" + of);
  check_label_value(input.hub_id, "the hub id (--hub-id)");
  const int stages = job.spec.parallelism.stages;
  const int replicas = job.spec.parallelism.replicas;
  if (static_cast<int64_t>(input.tasklets.size()) != job.spec.devices()) {
    throw std::invalid_argument("stage objects" + of + ": " + str(input.tasklets.size()) +
                                " tasklets placed, the job has stages x replicas = " + str(stages) +
                                " x " + str(replicas));
  }
  for (size_t r = 0; r < input.tasklets.size(); ++r) {
    const TaskletPlace& t = input.tasklets[r];
    const bool in_range =
        t.stage >= 0 && t.stage < stages && t.replica >= 0 && t.replica < replicas;
    if (t.rank != static_cast<int>(r) || !in_range || t.rank != t.replica * stages + t.stage) {
      throw std::invalid_argument("stage objects" + of + ": tasklet " + str(r) + " is rank " +
                                  str(t.rank) + ", stage " + str(t.stage) + ", replica " +
                                  str(t.replica) +
                                  "; tasklet r must be rank r = replica x stages + stage");
    }
    if (t.cluster.empty() || t.node.empty()) {
      throw std::invalid_argument("stage objects" + of + ": tasklet " + str(r) +
                                  " has no cluster or node");
    }
  }
  for (const auto& [field, value] :
       {std::pair{"token", &input.token}, std::pair{"CA certificate", &input.ca_pem},
        std::pair{"job.json", &input.job_json}}) {
    if (value->empty()) throw std::invalid_argument("stage objects" + of + ": empty " + field);
  }
  if (input.default_image.empty() && !job.spec.pod_template.contains("image")) {
    throw std::invalid_argument("stage objects" + of +
                                ": spec.template.image is unset and no default image is given");
  }
}

json remote_labels(const StageObjectsInput& input) {
  return {{kJobNameLabel, input.job->name},
          {kJobNamespaceLabel, input.job->namespace_name},
          {kJobUidLabel, input.job_uid},
          {kHubLabel, input.hub_id}};
}

json metadata(const StageObjectsInput& input, const std::string& name) {
  return {{"name", name},
          {"namespace", input.job->namespace_name},
          {"labels", remote_labels(input)},
          {"annotations", {{kAttemptAnnotation, str(input.attempt)}}}};
}

json stage_secret(const StageObjectsInput& input) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", metadata(input, stage_object_name(input.job->name))},
          {"type", "Opaque"},
          {"data",
           {{"token", kube::base64_encode(input.token)},
            {"ca.crt", kube::base64_encode(input.ca_pem)}}}};
}

json stage_config_map(const StageObjectsInput& input) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", metadata(input, stage_object_name(input.job->name))},
          {"data", {{"job.json", input.job_json}}}};
}

json stage_container(const StageObjectsInput& input, const TaskletPlace& tasklet) {
  const api::TrainingJobSpec& spec = input.job->spec;
  const json& tpl = spec.pod_template;
  json container = {
      {"name", kStageContainerName},
      {"image", tpl.value("image", input.default_image)},
      // The image's entrypoint is tessel-stage.
      {"args", {"--job", kJobFilePath, "--rank", str(tasklet.rank), "--device", "auto"}}};
  if (tpl.contains("imagePullPolicy")) container["imagePullPolicy"] = tpl["imagePullPolicy"];

  json resources = tpl.value("resources", json::object());
  for (const char* kind : {"requests", "limits"}) resources[kind][kGpuResource] = "1";
  container["resources"] = resources;

  // With the host's network the pod's IP is the node's; hostIP says so on every API version.
  const char* address_field = spec.network.host_network ? "status.hostIP" : "status.podIP";
  json env = json::array(
      {{{"name", kPodIpVariable},
        {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", address_field}}}}}}});
  for (const json& variable : tpl.value("env", json::array())) env.push_back(variable);
  container["env"] = env;

  json mounts = json::array(
      {{{"name", kJobFileVolume}, {"mountPath", kJobFileDirectory}, {"readOnly", true}},
       {{"name", kStageSecretVolume}, {"mountPath", kStageSecretDirectory}, {"readOnly", true}}});
  for (const json& mount : tpl.value("volumeMounts", json::array())) mounts.push_back(mount);
  container["volumeMounts"] = mounts;
  return container;
}

json stage_pod(const StageObjectsInput& input, const TaskletPlace& tasklet) {
  const api::TrainingJobSpec& spec = input.job->spec;
  const json& tpl = spec.pod_template;
  const std::string objects = stage_object_name(input.job->name);

  json pod_metadata =
      metadata(input, stage_pod_name(input.job->name, tasklet.stage, tasklet.replica));
  pod_metadata["labels"][kStageLabel] = str(tasklet.stage);
  pod_metadata["labels"][kReplicaLabel] = str(tasklet.replica);
  pod_metadata["labels"][kRankLabel] = str(tasklet.rank);

  json volumes =
      json::array({{{"name", kJobFileVolume}, {"configMap", {{"name", objects}}}},
                   {{"name", kStageSecretVolume}, {"secret", {{"secretName", objects}}}}});
  for (const json& volume : tpl.value("volumes", json::array())) volumes.push_back(volume);

  json pod_spec = {// The placement chose the node; the scheduler is not asked again.
                   {"nodeName", tasklet.node},
                   // A failed stage fails the gang, which the operator restarts as a whole.
                   {"restartPolicy", "Never"},
                   {"containers", json::array({stage_container(input, tasklet)})},
                   {"volumes", volumes}};
  // nodeName bypasses the scheduler, not the kubelet's admission: it rejects a pod whose
  // nodeSelector the node does not match, and evicts one that does not tolerate the node's
  // NoExecute taints. So both are kept: they are how a user says where stages may not run.
  for (const char* field : {"nodeSelector", "tolerations", "imagePullSecrets", "serviceAccountName",
                            "priorityClassName"}) {
    if (tpl.contains(field)) pod_spec[field] = tpl[field];
  }
  // Stages never call the Kubernetes API: no token unless the user names an account of theirs.
  if (!tpl.contains("serviceAccountName")) pod_spec["automountServiceAccountToken"] = false;
  if (spec.network.host_network) {
    pod_spec["hostNetwork"] = true;
    // Keeps cluster DNS for names like the operator's service (ClusterFirst would fall back to
    // the node's resolver with the host's network).
    pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet";
  }
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", pod_metadata}, {"spec", pod_spec}};
}

}  // namespace

std::string stage_pod_name(const std::string& job, int stage, int replica) {
  return job + "-s" + str(stage) + "-r" + str(replica);
}

std::string stage_object_name(const std::string& job) { return job + "-stage"; }

std::string remote_selector(const std::string& hub_id, const std::string& job_uid) {
  return std::string(kHubLabel) + "=" + hub_id + "," + kJobUidLabel + "=" + job_uid;
}

std::string label_value_violation(const std::string& value) {
  if (value.empty()) return "";
  if (value.size() > 63) return "must be at most 63 characters, has " + str(value.size());
  if (!is_alphanumeric(value.front()) || !is_alphanumeric(value.back()))
    return "must begin and end with a letter or digit";
  for (char c : value) {
    if (!is_alphanumeric(c) && c != '-' && c != '_' && c != '.')
      return "may hold only letters, digits, '-', '_' and '.'";
  }
  return "";
}

std::vector<api::FieldError> pod_template_errors(const json& pod_template) {
  std::vector<api::FieldError> errors;
  check_resources(pod_template.value("resources", json::object()), errors);
  check_env(pod_template.value("env", json::array()), errors);
  const std::set<std::string> volumes =
      check_volumes(pod_template.value("volumes", json::array()), errors);
  check_volume_mounts(pod_template.value("volumeMounts", json::array()), volumes, errors);
  return errors;
}

std::vector<MemberObjects> build_stage_objects(const StageObjectsInput& input) {
  check_input(input);
  const api::TrainingJob& job = *input.job;
  const std::vector<api::FieldError> errors = pod_template_errors(job.spec.pod_template);
  if (!errors.empty()) {
    throw api::ManifestError("TrainingJob " + job.namespace_name + "/" + job.name, errors);
  }
  std::map<std::string, MemberObjects> by_cluster;
  for (const TaskletPlace& tasklet : input.tasklets) {
    MemberObjects& member = by_cluster[tasklet.cluster];
    if (member.cluster.empty()) {
      member.cluster = tasklet.cluster;
      member.secret = stage_secret(input);
      member.config_map = stage_config_map(input);
    }
    member.pods.push_back(stage_pod(input, tasklet));
  }
  std::vector<MemberObjects> out;
  for (auto& [cluster, member] : by_cluster) out.push_back(std::move(member));
  return out;
}

}  // namespace tessel::controller
