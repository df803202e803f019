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
  json container = {{"name", kStageContainerName},
                    {"image", tpl.value("image", input.default_image)},
                    // The image's entrypoint is tessel-stage.
                    {"args",
                     {"--job", kJobFilePath, "--rank", str(tasklet.rank), "--device", "auto",
                      "--termination-log", kTerminationMessagePath}},
                    // The final figures the stage leaves there outlive an operator that missed its
                    // last progress events (proto/progress/termination_message.h).
                    {"terminationMessagePath", kTerminationMessagePath},
                    {"terminationMessagePolicy", "File"}};
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

std::vector<MemberObjects> build_stage_objects(const StageObjectsInput& input) {
  check_input(input);
  const api::TrainingJob& job = *input.job;
  const std::vector<api::FieldError> errors = api::pod_template_errors(job.spec.pod_template);
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
