// The e2e harness itself, proved without the operator: the GPU nodes the process kubelets play
// in both members (labels, capacity, link annotations of a topology whose clusters are joined by
// a slow link), the members registered with self-contained kubeconfigs that reach them, a stage
// pod run by a member's kubelet with the tessel-stage binary, the example job with this run's
// selectors accepted by the CRD, the "nothing left" check, the operator process wrapper, and the
// reader of kubectl's tables.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "api/link_annotations.h"
#include "kube/base64.h"
#include "kube/config.h"
#include "placement/atomic_file.h"
#include "tests/helm/helm_chart.h"
#include "tests/kubectl/child_process.h"
#include "tests/operator_e2e/chart_install.h"
#include "tests/operator_e2e/e2e_fixture.h"
#include "tests/operator_e2e/operator_pod.h"
#include "tests/support/http_server.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

// A core resource, copied out of the registry (a temporary).
kube::ResourceInfo builtin(const char* resource) {
  return *kube::ResourceRegistry().find_resource("", resource);
}

using E2eHarness = FederationE2e;

TEST_F(E2eHarness, EachMemberHasGpuNodesAnnotatedWithFastLinksInsideAndSlowOnesAcross) {
  for (int m = 0; m < federation_->member_count(); ++m) {
    kube::ListOptions options;
    options.label_selector = std::string(kRunLabel) + "=" + federation_->run_id();
    const json nodes = federation_->member(m).admin().list(builtin("nodes"), "", options);
    ASSERT_EQ(nodes["items"].size(), size_t{kNodesPerMember}) << nodes.dump();
    for (const json& node : nodes["items"]) {
      const std::string name = node["metadata"]["name"];
      const json& labels = node["metadata"]["labels"];
      EXPECT_EQ(labels.value("nvidia.com/gpu.product", ""), "NVIDIA-H200") << name;
      EXPECT_EQ(labels.value("topology.kubernetes.io/region", ""), federation_->member_region(m));
      EXPECT_EQ(labels.value("topology.kubernetes.io/zone", ""),
                federation_->member_region(m) + "a");
      EXPECT_EQ(node["status"]["allocatable"].value("nvidia.com/gpu", ""),
                std::to_string(kGpusPerNode))
          << name;
      EXPECT_EQ(condition_of(node, "Ready").value("status", ""), "True") << name;

      const api::NodeLinks links = api::parse_node_links(
          node["metadata"]["annotations"].value(api::kLinksAnnotation, ""), name);
      EXPECT_EQ(links.peers.size(), fleet_->nodes().size() - 1) << name;
      for (const auto& [peer, measured] : links.peers) {
        const bool across = peer.find('/') != std::string::npos;
        EXPECT_EQ(measured.bulk_gbps, across ? kSlowLinkGbps : kFastLinkGbps)
            << name << " " << peer;
        EXPECT_EQ(measured.rtt_p50_ms, across ? kSlowLinkRttMs : kFastLinkRttMs) << peer;
        if (across) {
          EXPECT_EQ(peer.substr(0, peer.find('/')), federation_->member_name(1 - m)) << peer;
        }
      }
    }
  }
  EXPECT_EQ(fleet_->total_gpus(), 2 * kNodesPerMember * kGpusPerNode);
}

TEST_F(E2eHarness, MembersAreRegisteredWithSelfContainedKubeconfigsThatReachThem) {
  const std::string listed = kubectl_ok(
      {"get", "memberclusters", "-l", std::string(kRunLabel) + "=" + federation_->run_id()});
  for (int m = 0; m < federation_->member_count(); ++m) {
    EXPECT_EQ(table_cell(listed, federation_->member_name(m), "REGION"),
              federation_->member_region(m))
        << listed;
    const std::string secret_name = federation_->member_name(m) + "-kubeconfig";
    const json secret = json::parse(kubectl_ok({"get", "secret", secret_name, "-o", "json"}));
    const std::optional<std::string> text =
        kube::base64_decode(secret["data"].value("kubeconfig", ""));
    ASSERT_TRUE(text) << secret.dump();
    // The operator's policy: no files, no plugins, verified TLS.
    const kube::ClusterConfig config =
        kube::kubeconfig_from_bytes(*text, secret_name, kube::KubeconfigBytesPolicy{});
    const json nodes =
        kube::Client::from_config(config, TestCluster::unlimited())->list(builtin("nodes"), "");
    EXPECT_FALSE(nodes["items"].empty()) << federation_->member_name(m);
  }
}

TEST_F(E2eHarness, AStagePodOnAGpuNodeRunsTheTesselStageBinary) {
  const GpuNode& node = fleet_->nodes().back();
  const json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "stage-help"},
        {"namespace", federation_->namespace_name()},
        {"labels", {{kJobUidLabel, "harness"}}}}},
      {"spec",
       {{"nodeName", node.name},
        {"restartPolicy", "Never"},
        {"automountServiceAccountToken", false},  // as the operator's stage pods: no API use
        {"containers",
         {{{"name", "stage"},
           {"image", "tessel/stage:0.1.0"},
           {"args", {"--help"}},
           {"resources",
            {{"requests", {{"nvidia.com/gpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
  kube::Client& member = federation_->member(node.member).admin();
  member.create(builtin("pods"), federation_->namespace_name(), pod);
  std::string phase;
  EXPECT_TRUE(wait_for(
      [&] {
        phase = member.get(builtin("pods"), federation_->namespace_name(), "stage-help")
                    .value("/status/phase"_json_pointer, "");
        return phase == "Succeeded" || phase == "Failed";
      },
      std::chrono::seconds(60)));
  EXPECT_EQ(phase, "Succeeded");
  std::ifstream log(
      fleet_->kubelet(node.member).pod_directory(federation_->namespace_name(), "stage-help") +
      "/stage.log");
  const std::string text{std::istreambuf_iterator<char>(log), {}};
  EXPECT_NE(text.find("usage: tessel-stage"), std::string::npos) << text;
  EXPECT_EQ(leftovers("harness").size(), 1u);
}

TEST_F(E2eHarness, NothingLeftFindsWhatAJobLeftInAnyMember) {
  const std::string uid = "0b5e7a52-harness";
  EXPECT_TRUE(leftovers(uid).empty());
  const json config_map = {{"apiVersion", "v1"},
                           {"kind", "ConfigMap"},
                           {"metadata",
                            {{"name", "left-behind"},
                             {"namespace", federation_->namespace_name()},
                             {"labels", {{kJobUidLabel, uid}}}}},
                           {"data", {{"job.json", "{}"}}}};
  federation_->member(1).admin().create(builtin("configmaps"), "", config_map);
  const std::vector<std::string> left = leftovers(uid);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0], federation_->member_name(1) + ": configmaps " + federation_->namespace_name() +
                         "/left-behind");
  federation_->member(1).admin().remove(builtin("configmaps"), federation_->namespace_name(),
                                        "left-behind");
  EXPECT_TRUE(leftovers(uid).empty());
}

TEST_F(E2eHarness, TheExampleJobWithThisRunsSelectorsIsAcceptedAndListed) {
  EXPECT_EQ(kubectl_ok({"apply", "-f", example_job("fables", 40)}),
            "trainingjob.tessel.dev/fables created\n");
  const json job = trainingjob("fables");
  EXPECT_EQ(job["spec"]["training"]["steps"], 40);
  EXPECT_EQ(job["spec"]["placement"]["gpuSelector"]["matchLabels"][kRunLabel],
            federation_->run_id());
  const std::string table = kubectl_ok({"get", "trainingjobs"});
  EXPECT_EQ(table_cell(table, "fables", "STAGES"), "2") << table;
  EXPECT_EQ(table_cell(table, "fables", "REPLICAS"), "2") << table;
  EXPECT_EQ(table_cell(table, "fables", "PHASE"), "") << table;  // no operator wrote a status
}

TEST(E2eData, TheExampleDataHasAUnigramEntropyBelowAUniformByte) {
  const double entropy = example_data_entropy();
  EXPECT_GT(entropy, 2.0);
  EXPECT_LT(entropy, std::log(256.0));  // the loss of a model that learned nothing
}

// A folder of its own for a case that writes files (cases run as parallel processes).
std::string case_folder(const std::string& name) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("tessel-e2e-" + name + "-" + std::to_string(::getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  return dir;
}

void write_script(const std::string& path, const std::string& text) {
  placement::write_file_atomically(path, text);
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

TEST(E2eOperatorProcess, AnOperatorThatExitsAtStartIsReportedWithItsLog) {
  const std::string dir = case_folder("process");
  const TestCertificateAuthority ca;
  placement::write_file_atomically(dir + "/ca.crt", ca.ca_pem());
  OperatorSettings settings;
  settings.binary = dir + "/fake-operator";
  write_script(settings.binary, "#!/bin/sh\necho \"fake operator refuses: $*\"\nexit 3\n");
  settings.tls_ca_file = dir + "/ca.crt";
  settings.identity = "replica-x";
  settings.args = {"--identity=replica-x", "--https-address=0.0.0.0:9443",
                   "--stage-service-advertise=127.0.0.1:7443", "--data-root=/data"};
  settings.ports = {{"https", 9443}, {"stage", 7443}};
  settings.log_file = dir + "/replica-x.log";
  try {
    OperatorProcess process(settings);
    ADD_FAILURE() << "the fake operator was taken for a running one";
  } catch (const std::runtime_error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("exited with status 3"), std::string::npos) << what;
    EXPECT_NE(what.find("fake operator refuses"), std::string::npos) << what;
    EXPECT_NE(what.find("--stage-service-advertise=127.0.0.1:"), std::string::npos) << what;
    // The container's ports are mapped onto loopback ports of this machine.
    EXPECT_EQ(what.find("127.0.0.1:7443"), std::string::npos) << what;
    EXPECT_EQ(what.find("0.0.0.0:9443"), std::string::npos) << what;
    EXPECT_NE(what.find("--identity=replica-x"), std::string::npos) << what;
    EXPECT_NE(what.find("--data-root=/data"), std::string::npos) << what;
  }
  std::filesystem::remove_all(dir);
}

// A stand-in for the operator that serves HTTPS on the address and with the certificate its flags
// name (openssl s_server answers every GET with 200): the wrapper's health check passes over TLS
// verified by the run's CA for 127.0.0.1, and stop() ends it.
TEST(E2eOperatorProcess, AnOperatorServingHttpsWithTheRunsCertificateIsTakenForHealthy) {
  if (!find_on_path("openssl")) GTEST_SKIP() << "no openssl on PATH";
  const std::string dir = case_folder("https");
  const TestCertificateAuthority ca;
  const TestCertificate certificate = ca.issue_server();
  OperatorSettings settings;
  settings.tls_ca_file = dir + "/ca.crt";
  const std::string cert_file = dir + "/tls.crt", key_file = dir + "/tls.key";
  placement::write_file_atomically(settings.tls_ca_file, ca.ca_pem());
  placement::write_file_atomically(cert_file, certificate.cert_pem);
  placement::write_file_atomically(key_file, certificate.key_pem);
  settings.binary = dir + "/https-operator";
  write_script(settings.binary, R"(#!/bin/sh
for arg in "$@"; do case "$arg" in
  --https-address=*) address="${arg#*=}" ;;
  --tls-cert-file=*) cert="${arg#*=}" ;;
  --tls-key-file=*) key="${arg#*=}" ;;
esac; done
exec openssl s_server -quiet -www -accept "$address" -cert "$cert" -key "$key"
)");
  settings.identity = "replica-https";
  settings.args = {"--https-address=0.0.0.0:9443", "--tls-cert-file=" + cert_file,
                   "--tls-key-file=" + key_file};
  settings.ports = {{"https", 9443}, {"stage", 7443}};
  settings.log_file = dir + "/replica-https.log";
  {
    OperatorProcess process(settings);
    EXPECT_TRUE(process.running());
    EXPECT_NE(process.https_port(), process.stage_port());
    const std::string health =
        "https://127.0.0.1:" + std::to_string(process.https_port()) + "/healthz";
    EXPECT_EQ(https_get_status(health, ca.ca_pem()), 200);
    // A client trusting another CA gets no answer: the check is a real TLS verification.
    EXPECT_EQ(https_get_status(health, TestCertificateAuthority().ca_pem()), 0);
    EXPECT_EQ(process.stop(SIGKILL), 128 + SIGKILL);
    EXPECT_FALSE(process.running());
  }
  std::filesystem::remove_all(dir);
}

// The replica's command line is the chart's Deployment's container, as a pod would run it: every
// rendered arg there, $(POD_NAME) expanded, mounted files under the pod's folder, the addresses of
// its named ports on loopback ports, the run's values in place.
TEST(E2eOperatorProcess, TheCommandLineIsTheChartsContainerMappedOntoThisMachine) {
  if (!helm::helm_binary()) GTEST_SKIP() << "no helm on PATH";
  const std::vector<RenderedObject> chart =
      render_chart({.chart = "tessel",
                    .release = "e2e-x",
                    .namespace_ = "tessel-test-x",
                    .set_values = hub_chart_values("tessel-test-x", "e2e-x", false),
                    .include_crds = false,
                    .set_json_values = {}});
  const json deployment = the_object(chart, "Deployment");
  const json pod = pod_from_template(deployment, "e2e-x-tessel-replica-0");
  EXPECT_EQ(pod["metadata"]["namespace"], "tessel-test-x");
  EXPECT_EQ(pod["metadata"]["labels"], deployment["spec"]["template"]["metadata"]["labels"]);
  const json& container = pod["spec"]["containers"][0];
  const std::map<std::string, std::string> env = container_env(pod, container);
  EXPECT_EQ(env.at("POD_NAME"), "e2e-x-tessel-replica-0");

  OperatorSettings settings;
  settings.binary = "tessel-operator";
  std::vector<std::string> expanded;
  for (const json& arg : container["args"]) expanded.push_back(expand_references(arg, env));
  settings.args = map_mount_paths(
      expanded, {{"/etc/tessel-operator/tls", "/work/pod/tls"}, {"/tmp", "/work/pod/tmp"}});
  settings.ports = container_ports(container);
  EXPECT_EQ(settings.ports, (std::map<std::string, int>{{"https", 9443}, {"stage", 7443}}));
  const std::vector<std::string> line =
      operator_command_line(settings, {{"https", 30001}, {"stage", 30002}});
  ASSERT_EQ(line.size(), container["args"].size() + 1);
  std::string joined;
  for (const auto& arg : line) joined += arg + " ";
  for (const std::string& flag : std::vector<std::string>{
           "--namespace=tessel-test-x ", "--hub-id=e2e-x ", "--watch-namespace=tessel-test-x ",
           "--member-selector=e2e.tessel.dev/run=e2e-x ", "--prober-namespace=tessel-test-x ",
           "--leader-elect=true ", "--lease-duration=6 ", "--renew-deadline=4 ",
           "--retry-period=1 ", "--identity=e2e-x-tessel-replica-0 ",
           "--pod-name=e2e-x-tessel-replica-0 ", "--https-address=127.0.0.1:30001 ",
           "--tls-cert-file=/work/pod/tls/tls.crt ", "--tls-key-file=/work/pod/tls/tls.key ",
           "--tls-ca-file=/work/pod/tls/ca.crt ", "--stage-service-address=127.0.0.1:30002 ",
           "--stage-service-advertise=127.0.0.1:30002 ",
           "--data-root=" + std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs ",
           "--status-interval=1 "})
    EXPECT_NE(joined.find(flag), std::string::npos) << flag << " in " << joined;
  EXPECT_EQ(joined.find("$("), std::string::npos) << joined;
  EXPECT_THROW(operator_command_line(settings, {{"https", 30001}}), std::runtime_error);
}

// On a real hub the test runs the replicas: the Deployment's own pods (and the one the test
// creates) must run nowhere, and the webhook configurations would point its API server at a
// Service it cannot reach.
TEST(E2eOperatorProcess, OnARealHubTheChartsPodsAreHeldOffEveryNode) {
  if (!helm::helm_binary()) GTEST_SKIP() << "no helm on PATH";
  for (const bool real : {false, true}) {
    const json deployment =
        the_object(render_chart({.chart = "tessel",
                                 .release = "e2e-x",
                                 .namespace_ = "tessel-test-x",
                                 .set_values = hub_chart_values("tessel-test-x", "e2e-x", real),
                                 .include_crds = false,
                                 .set_json_values = {}}),
                   "Deployment");
    const json selector =
        deployment.value("/spec/template/spec/nodeSelector"_json_pointer, json::object());
    EXPECT_EQ(selector.contains("e2e.tessel.dev/no-node"), real) << selector.dump();
  }
}

TEST(E2eOperatorPod, ReferencesExpandAsTheKubeletExpandsThem) {
  const std::map<std::string, std::string> env = {{"POD_NAME", "p-1"}, {"EMPTY", ""}};
  EXPECT_EQ(expand_references("--identity=$(POD_NAME)", env), "--identity=p-1");
  EXPECT_EQ(expand_references("$(POD_NAME)/$(EMPTY)x", env), "p-1/x");
  EXPECT_EQ(expand_references("$(UNDEFINED) $$(POD_NAME) $", env), "$(UNDEFINED) $(POD_NAME) $");
  EXPECT_EQ(expand_references("$(POD_NAME", env), "$(POD_NAME");
}

TEST(E2eOperatorPod, MountPathsAreMappedOnlyAtAPathsStart) {
  const std::map<std::string, std::string> folders = {{"/etc/t", "/w/a"}, {"/etc/t/tls", "/w/b"}};
  EXPECT_EQ(map_mount_paths({"--f=/etc/t/tls/ca.crt", "--g=/etc/t/x", "/etc/t", "--h=/etc/tt",
                             "--i=x/etc/t", "--j"},
                            folders),
            (std::vector<std::string>{"--f=/w/b/ca.crt", "--g=/w/a/x", "/w/a", "--h=/etc/tt",
                                      "--i=x/etc/t", "--j"}));
  // The stage pods' data root is not the operator container's path, even under one of its
  // mounts (a checkout under /tmp, the chart's emptyDir).
  EXPECT_EQ(map_mount_paths({"--data-root=/tmp/src/examples", "--k=/tmp/src"}, {{"/tmp", "/w/t"}}),
            (std::vector<std::string>{"--data-root=/tmp/src/examples", "--k=/w/t/src"}));
}

TEST(E2eOperatorPod, EnvFromAnythingButTheDownwardApiIsRefusedByName) {
  const json pod = {{"metadata", {{"name", "p"}, {"namespace", "n"}}},
                    {"spec", {{"serviceAccountName", "sa"}}}};
  const json container = {
      {"name", "operator"},
      {"env",
       {{{"name", "A"}, {"value", "x"}},
        {{"name", "B"}, {"value", "$(A)y"}},
        {{"name", "NS"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
        {{"name", "IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
        {{"name", "SA"},
         {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.serviceAccountName"}}}}}}}}};
  EXPECT_EQ(container_env(pod, container),
            (std::map<std::string, std::string>{
                {"A", "x"}, {"B", "xy"}, {"NS", "n"}, {"IP", "127.0.0.1"}, {"SA", "sa"}}));
  json secret_env = container;
  secret_env["env"].push_back(json{
      {"name", "TOKEN"}, {"valueFrom", {{"secretKeyRef", {{"name", "s"}, {"key", "token"}}}}}});
  try {
    container_env(pod, secret_env);
    ADD_FAILURE() << "a secretKeyRef was resolved";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("env TOKEN"), std::string::npos) << error.what();
  }
}

TEST(E2eOperatorPod, TheWebhookServiceEndpointsNameThePodAndItsMappedPort) {
  const json service = {
      {"metadata", {{"name", "t-tessel"}, {"namespace", "n"}, {"labels", {{"a", "b"}}}}},
      {"spec", {{"ports", {{{"name", "https"}, {"port", 443}, {"targetPort", "https"}}}}}}};
  const json endpoints = endpoints_for(service, "t-tessel-replica-0", {{"https", 30001}});
  EXPECT_EQ(endpoints["metadata"]["name"], "t-tessel");
  EXPECT_EQ(endpoints["metadata"]["labels"]["a"], "b");
  EXPECT_EQ(endpoints["subsets"][0]["addresses"][0]["ip"], "127.0.0.1");
  EXPECT_EQ(endpoints["subsets"][0]["addresses"][0]["targetRef"]["name"], "t-tessel-replica-0");
  EXPECT_EQ(endpoints["subsets"][0]["ports"][0],
            (json{{"name", "https"}, {"port", 30001}, {"protocol", "TCP"}}));
  EXPECT_THROW(endpoints_for(service, "p", {{"stage", 30002}}), std::runtime_error);
}

TEST(E2eTable, CellsAreFoundByTheHeadersOffsetsEvenWhenEmpty) {
  const std::string table =
      "NAME     PHASE     STAGES   CLUSTERS      STEP   LOSS\n"
      "fables   Running   2        a,b           12     4.51\n"
      "big                2                                \n";
  EXPECT_EQ(table_cell(table, "fables", "PHASE"), "Running");
  EXPECT_EQ(table_cell(table, "fables", "LOSS"), "4.51");
  EXPECT_EQ(table_cell(table, "fables", "STEP"), "12");
  EXPECT_EQ(table_cell(table, "big", "PHASE"), "");
  EXPECT_EQ(table_cell(table, "big", "STAGES"), "2");
  EXPECT_EQ(table_cell(table, "big", "LOSS"), "");
  EXPECT_EQ(table_cell(table, "absent", "PHASE"), std::nullopt);
  EXPECT_EQ(table_cell(table, "fables", "ETA"), std::nullopt);
}

}  // namespace
}  // namespace tessel::testing
