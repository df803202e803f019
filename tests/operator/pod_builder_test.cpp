// The member-cluster objects of a placed TrainingJob: names, labels, the stage's args, env and
// volumes, spec.template merged in, every refusal naming its field, and an API server (the test
// server, or a real one through TESSEL_TEST_KUBECONFIG) accepting what is built.
#include "operator/controller/pod_builder.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "api/yaml_json.h"
#include "kube/api_error.h"
#include "kube/base64.h"
#include "tests/support/test_cluster.h"

namespace tessel::controller {
namespace {

using nlohmann::json;

constexpr const char* kUid = "0d6f2a4e-3b1c-4d8e-9f70-123456789abc";

json fables_object(const std::string& ns, const json& pod_template = json::object()) {
  const std::string path = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  json object = api::yaml_to_json(text.str(), path);
  object["metadata"]["namespace"] = ns;
  object["metadata"]["uid"] = kUid;
  if (!pod_template.empty()) object["spec"]["template"] = pod_template;
  return object;
}

api::TrainingJob fables(const std::string& ns = "research",
                        const json& pod_template = json::object()) {
  return api::parse_trainingjob(fables_object(ns, pod_template), "fables.yaml");
}

// fables is 2 stages x 2 replicas; rank = replica x 2 + stage.
std::vector<TaskletPlace> two_cluster_placement() {
  return {{0, 0, 0, "member-b", "gpu-b1"},
          {1, 1, 0, "member-a", "gpu-a1"},
          {2, 0, 1, "member-b", "gpu-b2"},
          {3, 1, 1, "member-a", "gpu-a1"}};
}

StageObjectsInput input_for(const api::TrainingJob& job) {
  StageObjectsInput input;
  input.job = &job;
  input.job_uid = kUid;
  input.hub_id = "hub-eu";
  input.tasklets = two_cluster_placement();
  input.job_json = R"({"job_id": 42})";
  input.token = std::string(64, 'f');
  input.ca_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  input.default_image = "tessel/stage:0.1.0";
  input.attempt = 3;
  return input;
}

const json& stage_container(const json& pod) { return pod.at("spec").at("containers").at(0); }

json env_named(const json& pod, const std::string& name) {
  for (const json& variable : stage_container(pod).at("env")) {
    if (variable.at("name") == name) return variable;
  }
  return nullptr;
}

// The error of `field`, or "" when none names it.
std::string error_of(const std::vector<api::FieldError>& errors, const std::string& field) {
  for (const api::FieldError& error : errors) {
    if (error.field == field) return error.message;
  }
  return "";
}

TEST(PodBuilderNames, PodsObjectsAndTheRemoteSelector) {
  EXPECT_EQ(stage_pod_name("fables", 1, 0), "fables-s1-r0");
  EXPECT_EQ(stage_pod_name("fables", 1023, 63), "fables-s1023-r63");
  EXPECT_EQ(stage_object_name("fables"), "fables-stage");
  EXPECT_EQ(remote_selector("hub-eu", kUid),
            std::string("tessel.dev/hub=hub-eu,tessel.dev/job-uid=") + kUid);
  // The longest job name with the largest stage and replica stays a DNS-1123 label.
  const std::string longest(api::kMaxJobNameLength, 'j');
  EXPECT_LE(stage_pod_name(longest, 1023, 63).size(), 63u);
  EXPECT_LE(stage_object_name(longest).size(), 63u);
}

TEST(PodBuilderNames, LabelValues) {
  EXPECT_EQ(label_value_violation(""), "");
  EXPECT_EQ(label_value_violation("hub-eu_1.a"), "");
  EXPECT_EQ(label_value_violation(kUid), "");
  EXPECT_EQ(label_value_violation("-hub"), "must begin and end with a letter or digit");
  EXPECT_EQ(label_value_violation("hub/eu"), "may hold only letters, digits, '-', '_' and '.'");
  EXPECT_EQ(label_value_violation(std::string(64, 'a')), "must be at most 63 characters, has 64");
}

TEST(BuildStageObjects, OneSecretConfigMapAndAPodPerTaskletInEachMember) {
  const api::TrainingJob job = fables();
  const std::vector<MemberObjects> members = build_stage_objects(input_for(job));
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].cluster, "member-a");  // cluster name order
  EXPECT_EQ(members[1].cluster, "member-b");

  const json labels = {{"tessel.dev/job", "fables"},
                       {"tessel.dev/job-namespace", "research"},
                       {"tessel.dev/job-uid", kUid},
                       {"tessel.dev/hub", "hub-eu"}};
  const json annotations = {{"tessel.dev/attempt", "3"}};
  for (const MemberObjects& member : members) {
    const json& secret = member.secret;
    EXPECT_EQ(secret["kind"], "Secret");
    EXPECT_EQ(secret["metadata"]["name"], "fables-stage");
    EXPECT_EQ(secret["metadata"]["namespace"], "research");
    EXPECT_EQ(secret["metadata"]["labels"], labels);
    EXPECT_EQ(secret["metadata"]["annotations"], annotations);
    EXPECT_EQ(kube::base64_decode(secret["data"]["token"].get<std::string>()),
              std::string(64, 'f'));
    EXPECT_EQ(kube::base64_decode(secret["data"]["ca.crt"].get<std::string>()),
              input_for(job).ca_pem);
    const json& config_map = member.config_map;
    EXPECT_EQ(config_map["kind"], "ConfigMap");
    EXPECT_EQ(config_map["metadata"]["name"], "fables-stage");
    EXPECT_EQ(config_map["metadata"]["labels"], labels);
    EXPECT_EQ(config_map["metadata"]["annotations"], annotations);
    EXPECT_EQ(config_map["data"], json({{"job.json", R"({"job_id": 42})"}}));
    ASSERT_EQ(member.pods.size(), 2u);
  }

  // member-a holds ranks 1 and 3 (stage 1 of both replicas), in rank order.
  const json& pod = members[0].pods[1];
  EXPECT_EQ(members[0].pods[0]["metadata"]["name"], "fables-s1-r0");
  EXPECT_EQ(pod["metadata"]["name"], "fables-s1-r1");
  EXPECT_EQ(pod["metadata"]["namespace"], "research");
  json pod_labels = labels;
  pod_labels["tessel.dev/stage"] = "1";
  pod_labels["tessel.dev/replica"] = "1";
  pod_labels["tessel.dev/rank"] = "3";
  EXPECT_EQ(pod["metadata"]["labels"], pod_labels);
  EXPECT_EQ(pod["metadata"]["annotations"], annotations);
  EXPECT_EQ(members[1].pods[0]["metadata"]["name"], "fables-s0-r0");
  EXPECT_EQ(members[1].pods[0]["spec"]["nodeName"], "gpu-b1");
  EXPECT_EQ(members[1].pods[1]["spec"]["nodeName"], "gpu-b2");

  const json& spec = pod["spec"];
  EXPECT_EQ(spec["nodeName"], "gpu-a1");
  EXPECT_EQ(spec["restartPolicy"], "Never");
  EXPECT_EQ(spec["automountServiceAccountToken"], false);
  EXPECT_FALSE(spec.contains("hostNetwork"));
  EXPECT_EQ(spec["volumes"], json::parse(R"([
      {"name": "tessel-job", "configMap": {"name": "fables-stage"}},
      {"name": "tessel-stage", "secret": {"secretName": "fables-stage"}}])"));
  ASSERT_EQ(spec["containers"].size(), 1u);
  const json& container = stage_container(pod);
  EXPECT_EQ(container["name"], "stage");
  EXPECT_EQ(container["image"], "tessel/stage:0.1.0");
  EXPECT_FALSE(container.contains("command"));  // the image's entrypoint is tessel-stage
  EXPECT_EQ(container["args"], json({"--job", "/etc/tessel/job/job.json", "--rank", "3", "--device",
                                     "auto", "--termination-log", "/dev/termination-log"}));
  // The stage's final figures land where the kubelet reads the termination message from.
  EXPECT_EQ(container["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(container["terminationMessagePolicy"], "File");
  EXPECT_EQ(container["resources"], json::parse(R"({"requests": {"nvidia.com/gpu": "1"},
                                                    "limits": {"nvidia.com/gpu": "1"}})"));
  EXPECT_EQ(container["env"], json::parse(R"([{"name": "POD_IP", "valueFrom":
      {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}])"));
  EXPECT_EQ(container["volumeMounts"], json::parse(R"([
      {"name": "tessel-job", "mountPath": "/etc/tessel/job", "readOnly": true},
      {"name": "tessel-stage", "mountPath": "/etc/tessel/stage", "readOnly": true}])"));
  // job.json names the Secret's files by the paths the volumes put them at.
  EXPECT_EQ(std::string(kStageTokenPath), std::string(kStageSecretDirectory) + "/token");
  EXPECT_EQ(std::string(kStageCaPath), std::string(kStageSecretDirectory) + "/ca.crt");
  EXPECT_EQ(std::string(kJobFilePath), std::string(kJobFileDirectory) + "/job.json");
}

TEST(BuildStageObjects, OneMemberGetsEverything) {
  const api::TrainingJob job = fables();
  StageObjectsInput input = input_for(job);
  for (TaskletPlace& tasklet : input.tasklets) tasklet.cluster = "only";
  const std::vector<MemberObjects> members = build_stage_objects(input);
  ASSERT_EQ(members.size(), 1u);
  ASSERT_EQ(members[0].pods.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(members[0].pods[rank]["metadata"]["labels"]["tessel.dev/rank"], std::to_string(rank));
  }
}

json full_template() {
  return json::parse(R"({
    "image": "registry.example/tessel/stage:0.2.0",
    "imagePullPolicy": "Always",
    "imagePullSecrets": [{"name": "regcred"}],
    "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1},
                  "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"}},
    "env": [{"name": "NCCL_DEBUG", "value": "INFO"},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
    "volumes": [{"name": "data", "emptyDir": {}}],
    "volumeMounts": [{"name": "data", "mountPath": "/data"},
                     {"name": "tessel-job", "mountPath": "/job-too", "readOnly": true}],
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
  })");
}

TEST(BuildStageObjects, TheTemplateIsMergedIn) {
  json pod_template = full_template();
  pod_template["serviceAccountName"] = "trainer";
  pod_template["priorityClassName"] = "training";
  const api::TrainingJob job = fables("research", pod_template);
  const json pod = build_stage_objects(input_for(job))[0].pods[0];
  const json& spec = pod["spec"];
  EXPECT_EQ(spec["nodeName"], "gpu-a1");
  EXPECT_EQ(spec["nodeSelector"], pod_template["nodeSelector"]);
  EXPECT_EQ(spec["tolerations"], pod_template["tolerations"]);
  EXPECT_EQ(spec["imagePullSecrets"], pod_template["imagePullSecrets"]);
  EXPECT_EQ(spec["serviceAccountName"], "trainer");
  EXPECT_FALSE(spec.contains("automountServiceAccountToken"));  // the user's account: their call
  EXPECT_EQ(spec["priorityClassName"], "training");
  ASSERT_EQ(spec["volumes"].size(), 3u);
  EXPECT_EQ(spec["volumes"][2], pod_template["volumes"][0]);  // beside tessel's two

  const json& container = stage_container(pod);
  EXPECT_EQ(container["image"], "registry.example/tessel/stage:0.2.0");
  EXPECT_EQ(container["imagePullPolicy"], "Always");
  EXPECT_EQ(container["resources"], json::parse(R"({
      "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
      "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"}})"));
  ASSERT_EQ(container["env"].size(), 3u);  // tessel's first, then the template's in order
  EXPECT_EQ(container["env"][0]["name"], "POD_IP");
  EXPECT_EQ(container["env"][1], pod_template["env"][0]);
  EXPECT_EQ(container["env"][2], pod_template["env"][1]);
  ASSERT_EQ(container["volumeMounts"].size(), 4u);
  EXPECT_EQ(container["volumeMounts"][2], pod_template["volumeMounts"][0]);
  EXPECT_EQ(container["volumeMounts"][3], pod_template["volumeMounts"][1]);
}

TEST(BuildStageObjects, HostNetworkAdvertisesTheHostsAddress) {
  json object = fables_object("research");
  object["spec"]["network"] = {{"mode", "HostNetwork"}};
  const api::TrainingJob job = api::parse_trainingjob(object, "fables.yaml");
  const json pod = build_stage_objects(input_for(job))[0].pods[0];
  EXPECT_EQ(pod["spec"]["hostNetwork"], true);
  EXPECT_EQ(pod["spec"]["dnsPolicy"], "ClusterFirstWithHostNet");
  EXPECT_EQ(env_named(pod, "POD_IP")["valueFrom"]["fieldRef"]["fieldPath"], "status.hostIP");
}

TEST(PodTemplateErrors, AValidTemplateHasNone) {
  EXPECT_TRUE(pod_template_errors(json::object()).empty());
  EXPECT_TRUE(pod_template_errors(full_template()).empty());
}

TEST(PodTemplateErrors, EveryRefusalNamesItsField) {
  const json bad = json::parse(R"({
    "resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": 4}},
    "env": [{"name": "A", "value": "1"}, {"name": "POD_IP", "value": "10.0.0.1"}],
    "volumes": [{"name": "tessel-job", "emptyDir": {}}, {"name": "data", "emptyDir": {}},
                {"name": "tessel-stage", "emptyDir": {}}, {"name": "data", "emptyDir": {}}],
    "volumeMounts": [{"name": "data", "mountPath": "/etc/tessel/stage/"},
                     {"name": "scratch", "mountPath": "/scratch"},
                     {"name": "data", "mountPath": "/scratch"}]
  })");
  const std::vector<api::FieldError> errors = pod_template_errors(bad);
  EXPECT_EQ(errors.size(), 9u);
  EXPECT_EQ(error_of(errors, "spec.template.resources.requests[nvidia.com/gpu]"),
            "tessel gives every stage pod exactly 1 GPU, got \"2\"; a job gets more GPUs from "
            "more stages or replicas");
  EXPECT_NE(error_of(errors, "spec.template.resources.limits[nvidia.com/gpu]").find("got 4"),
            std::string::npos);
  EXPECT_EQ(error_of(errors, "spec.template.env[1].name"),
            "POD_IP is set by tessel (the address the stage advertises to its peers) and may not "
            "be overridden");
  EXPECT_EQ(error_of(errors, "spec.template.volumes[0].name"),
            "\"tessel-job\" is the name of a volume tessel adds (the job file); pick another");
  EXPECT_EQ(error_of(errors, "spec.template.volumes[2].name"),
            "\"tessel-stage\" is the name of a volume tessel adds (the job's token); pick another");
  EXPECT_EQ(error_of(errors, "spec.template.volumes[3].name"),
            "\"data\" is also the name of spec.template.volumes[1]");
  EXPECT_EQ(error_of(errors, "spec.template.volumeMounts[0].mountPath"),
            "\"/etc/tessel/stage\" is already the mount path of tessel's token (volume "
            "tessel-stage); every mount needs its own path");
  EXPECT_EQ(error_of(errors, "spec.template.volumeMounts[1].name"),
            "\"scratch\" names no volume of spec.template.volumes");
  EXPECT_EQ(error_of(errors, "spec.template.volumeMounts[2].mountPath"),
            "\"/scratch\" is already the mount path of spec.template.volumeMounts[1]; every "
            "mount needs its own path");
}

TEST(PodTemplateErrors, TheJobsParserAndTheBuilderRefuseWithEveryError) {
  const json bad = json::parse(R"({"resources": {"limits": {"nvidia.com/gpu": "8"}},
                                  "env": [{"name": "POD_IP", "value": "x"}]})");
  // The rules are the TrainingJob's (api/pod_template.h): its parser refuses the job at once.
  EXPECT_THROW(fables("research", bad), api::ManifestError);
  // And the builder still refuses a spec that did not come through the parser.
  api::TrainingJob job = fables("research");
  job.spec.pod_template = bad;
  try {
    build_stage_objects(input_for(job));
    FAIL() << "a template asking for 8 GPUs was built";
  } catch (const api::ManifestError& error) {
    EXPECT_EQ(error.source(), "TrainingJob research/fables");
    ASSERT_EQ(error.errors().size(), 2u);
    EXPECT_EQ(error.errors()[0].field, "spec.template.resources.limits[nvidia.com/gpu]");
    EXPECT_EQ(error.errors()[1].field, "spec.template.env[0].name");
    EXPECT_NE(std::string(error.what()).find("got \"8\""), std::string::npos);
  }
}

void expect_refused(const StageObjectsInput& input, const std::string& part) {
  try {
    build_stage_objects(input);
    ADD_FAILURE() << "built; expected an error containing: " << part;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
  }
}

TEST(BuildStageObjects, InputsTheCallerGotWrongAreRefused) {
  const api::TrainingJob job = fables();
  StageObjectsInput input = input_for(job);
  input.tasklets.pop_back();
  expect_refused(input,
                 "TrainingJob research/fables: 3 tasklets placed, the job has stages x "
                 "replicas = 2 x 2");
  input = input_for(job);
  std::swap(input.tasklets[1], input.tasklets[2]);
  expect_refused(input, "tasklet 1 is rank 2, stage 0, replica 1; tasklet r must be rank r");
  input = input_for(job);
  input.tasklets[1].stage = 0;  // rank 1 cannot be stage 0 of replica 0
  expect_refused(input, "tasklet 1 is rank 1, stage 0, replica 0");
  input = input_for(job);
  input.tasklets[3].node.clear();
  expect_refused(input, "tasklet 3 has no cluster or node");
  input = input_for(job);
  input.hub_id = "hub/eu";
  expect_refused(input, "the hub id (--hub-id) \"hub/eu\" is not a usable label value: may hold");
  input = input_for(job);
  input.job_uid.clear();
  expect_refused(input, "the uid of TrainingJob research/fables \"\" is not a usable label value");
  input = input_for(job);
  input.token.clear();
  expect_refused(input, "empty token");
  input = input_for(job);
  input.ca_pem.clear();
  expect_refused(input, "empty CA certificate");
  input = input_for(job);
  input.default_image.clear();
  expect_refused(input, "spec.template.image is unset and no default image is given");
  input = input_for(job);
  input.job = nullptr;
  expect_refused(input, "no TrainingJob given");
}

// On a real cluster the ServiceAccount admission refuses pods until the namespace's "default"
// account exists (its controller makes it moments after the namespace).
void wait_for_default_service_account(const testing::TestCluster& cluster) {
  if (!cluster.is_real()) return;
  kube::Client& client = cluster.admin();
  const kube::ResourceInfo accounts = client.resource_for("v1", "ServiceAccount");
  for (int i = 0; i < 300; ++i) {
    try {
      client.get(accounts, cluster.namespace_name(), "default");
      return;
    } catch (const kube::ApiError& error) {
      if (error.code() != 404) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL() << "no ServiceAccount default in " << cluster.namespace_name() << " after 30 s";
}

TEST(BuildStageObjects, AnApiServerAcceptsEveryObject) {
  testing::TestCluster cluster;
  wait_for_default_service_account(cluster);
  kube::Client& client = cluster.admin();
  kube::WriteOptions dry_run;
  dry_run.dry_run = true;
  dry_run.field_validation = "Strict";  // an unknown field would be refused, not dropped
  for (const bool host_network : {false, true}) {
    json object = fables_object(cluster.namespace_name(), full_template());
    if (host_network) object["spec"]["network"] = {{"mode", "HostNetwork"}};
    const api::TrainingJob job = api::parse_trainingjob(object, "fables.yaml");
    for (const MemberObjects& member : build_stage_objects(input_for(job))) {
      SCOPED_TRACE(member.cluster + (host_network ? " HostNetwork" : " PodNetwork"));
      const json secret = client.create(member.secret, dry_run);
      EXPECT_EQ(secret["data"], member.secret["data"]);
      const json config_map = client.create(member.config_map, dry_run);
      EXPECT_EQ(config_map["data"], member.config_map["data"]);
      for (const json& pod : member.pods) {
        const json created = client.create(pod, dry_run);
        EXPECT_EQ(created["metadata"]["labels"], pod["metadata"]["labels"]);
        EXPECT_EQ(created["spec"]["nodeName"], pod["spec"]["nodeName"]);
        EXPECT_EQ(created["spec"].value("hostNetwork", false), host_network);
      }
    }
  }
  // The server does check pods: a mount of no volume, which the template check refuses, it
  // refuses too.
  const api::TrainingJob job = fables(cluster.namespace_name());
  json pod = build_stage_objects(input_for(job))[0].pods[0];
  pod["spec"]["containers"][0]["volumeMounts"].push_back(
      {{"name", "scratch"}, {"mountPath", "/scratch"}});
  try {
    client.create(pod, dry_run);
    ADD_FAILURE() << "a pod mounting a volume it does not have was accepted";
  } catch (const kube::ApiError& error) {
    EXPECT_EQ(error.code(), 422) << error.what();
  }
}

}  // namespace
}  // namespace tessel::controller
