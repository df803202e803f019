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
#include "tests/kubectl/child_process.h"
#include "tests/operator_e2e/e2e_fixture.h"
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
  settings.data_root = "/data";
  settings.log_file = dir + "/replica-x.log";
  try {
    OperatorProcess process(settings);
    ADD_FAILURE() << "the fake operator was taken for a running one";
  } catch (const std::runtime_error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("exited with status 3"), std::string::npos) << what;
    EXPECT_NE(what.find("fake operator refuses"), std::string::npos) << what;
    EXPECT_NE(what.find("--stage-service-advertise=127.0.0.1:"), std::string::npos) << what;
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
  settings.tls_cert_file = dir + "/tls.crt";
  settings.tls_key_file = dir + "/tls.key";
  placement::write_file_atomically(settings.tls_ca_file, ca.ca_pem());
  placement::write_file_atomically(settings.tls_cert_file, certificate.cert_pem);
  placement::write_file_atomically(settings.tls_key_file, certificate.key_pem);
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

TEST(E2eOperatorProcess, TheCommandLineCarriesEveryFlagOfThePlan) {
  OperatorSettings settings;
  settings.binary = "tessel-operator";
  settings.namespace_ = "tessel-test-x";
  settings.member_selector = "e2e.tessel.dev/run=x";
  const std::vector<std::string> line = operator_command_line(settings, 8443, 9443);
  std::string joined;
  for (const auto& arg : line) joined += arg + " ";
  for (const char* flag :
       {"--kubeconfig=", "--namespace=", "--hub-id=", "--leader-elect=true",
        "--identity=", "--lease-duration=6", "--renew-deadline=4", "--retry-period=1",
        "--https-address=127.0.0.1:8443", "--tls-cert-file=", "--tls-key-file=", "--tls-ca-file=",
        "--stage-service-address=127.0.0.1:9443", "--stage-service-advertise=127.0.0.1:9443",
        "--data-root=", "--status-interval=1", "--watch-namespace=tessel-test-x",
        "--prober-namespace=tessel-test-x",
        "--member-selector=e2e.tessel.dev/run=x"})
    EXPECT_NE(joined.find(flag), std::string::npos) << flag << " in " << joined;
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
