// The prober end to end (issue 12): tessel-prober runs as a pod on every GPU node of two member
// clusters (the process kubelet runs it, host network, as the DaemonSet would), finds its
// cluster's peers through the member's API and the other cluster's through the ConfigMap the
// operator keeps there, measures them and annotates its own Node; the operator's placement of a
// job then rests on those measurements (status.placement.links says so, with their figures); a
// prober that stops answering is aged out of its peers' annotations.
//
// All probers run on this machine, so the links are told apart by the prober's link emulator:
// every peer at kNearGbps with kNearDelayMs added, the other cluster's at kFarGbps with
// kFarDelayMs. The bounds below are wide (this is not the accuracy test: tests/prober/accuracy
// is), but they separate a measurement from the operator's estimates (25 Gbit/s inside a zone,
// 1 Gbit/s across regions).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "api/link_annotations.h"
#include "api/prober_peers.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "noderuntime/transport/socket.h"
#include "tests/operator_e2e/chart_install.h"
#include "tests/operator_e2e/e2e_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr double kNearGbps = 1.0, kNearDelayMs = 1.0;
constexpr double kFarGbps = 0.2, kFarDelayMs = 20.0;
// From the probers' start to every node annotated with all its peers: each prober measures its
// three peers one at a time (a second of bulk each) once they are found.
constexpr seconds kAnnotatedTimeout{150};
constexpr seconds kPlacedTimeout{120};
// A prober that stops answering fails its peers' checks (every kCheckSeconds, backing off) and
// is aged out after three failures or kPeerTtlSeconds without an answer.
constexpr int kCheckSeconds = 2;
constexpr int kPeerTtlSeconds = 30;
constexpr seconds kAgedOutTimeout{120};

const kube::ResourceInfo& builtin(const char* resource) {
  static const kube::ResourceRegistry registry;
  return *registry.find_resource("", resource);
}

std::string random_secret() {
  std::random_device device;
  std::string secret;
  for (int i = 0; i < 32; ++i) secret += "0123456789abcdef"[device() % 16];
  return secret;
}

// A port free now, for a prober's --listen: the pod spec must name the port before the prober
// binds it (a host-network DaemonSet names one port for all nodes; here the nodes share one
// host, so each gets its own).
uint16_t free_port() { return transport::TcpListener::bind("127.0.0.1", 0).port(); }

// The pid of the tessel-prober process listening on `port` (the kubelet runs it on this host).
std::optional<pid_t> prober_pid(uint16_t port) {
  const std::string listen = "--listen=127.0.0.1:" + std::to_string(port);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream file(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (cmdline.find("tessel-prober") != std::string::npos &&
        cmdline.find(listen + '\0') != std::string::npos)
      return static_cast<pid_t>(std::stoi(name));
  }
  return std::nullopt;
}

class ProberE2e : public OperatorE2e {
 protected:
  FleetOptions fleet_options() const override {
    return {.stage_binary = TESSEL_STAGE_BINARY,
            .write_links = false,
            .more_images = {{"tessel/prober", TESSEL_PROBER_BINARY}},
            .node_networks = {}};
  }

  void SetUp() override {
    OperatorE2e::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string secret = random_secret();
    for (int m = 0; m < federation_->member_count(); ++m) {
      // The probers act as the member chart's prober ServiceAccount (its RBAC, on a test server
      // with Authorization::kRbac), with a token in place of the in-cluster files.
      const std::string account =
          the_object(federation_->member_chart(m), "DaemonSet")
              .value("/spec/template/spec/serviceAccountName"_json_pointer, std::string("default"));
      const std::string kubeconfig = token_kubeconfig(
          federation_->member(m).config(), create_token(federation_->member_kubectl(m), account),
          federation_->namespace_name());
      kube::Client& member = federation_->member(m).admin();
      member.create(builtin("secrets"), federation_->namespace_name(),
                    {{"apiVersion", "v1"},
                     {"kind", "Secret"},
                     {"metadata", {{"name", "tessel-prober"}}},
                     {"stringData", {{"secret", secret}, {"kubeconfig", kubeconfig}}}});
    }
    for (const GpuNode& node : fleet_->nodes()) {
      const uint16_t port = free_port();
      ports_[node.name] = port;
      federation_->member(node.member)
          .admin()
          .create(builtin("pods"), federation_->namespace_name(), prober_pod(node, port));
    }
  }

  void TearDown() override {
    if (stopped_) ::kill(*stopped_, SIGKILL);  // a stopped process ignores SIGTERM
    OperatorE2e::TearDown();
  }

  // The pod the prober DaemonSet would make on `node`, listening on `port`.
  json prober_pod(const GpuNode& node, uint16_t port) const {
    const std::string other_cluster = federation_->member_name(1 - node.member);
    const auto link = [](double gbps, double ms) {
      return std::to_string(gbps) + "/" + std::to_string(ms);
    };
    return {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", "tessel-prober-" + node.name},
          {"labels",
           {{"app.kubernetes.io/name", "tessel-prober"}, {kRunLabel, federation_->run_id()}}}}},
        {"spec",
         {{"nodeName", node.name},
          {"hostNetwork", true},
          // The member's API is reached with the kubeconfig of the Secret (the process runs
          // on this machine, whatever the cluster): a token of the chart's prober account.
          {"automountServiceAccountToken", false},
          {"containers",
           {{{"name", "prober"},
             {"image", "tessel/prober:0.1.0"},
             {"args",
              {"--kubeconfig=/etc/tessel-prober/kubeconfig",
               "--secret-file=/etc/tessel-prober/secret",
               "--listen=127.0.0.1:" + std::to_string(port),
               "--check-interval=" + std::to_string(kCheckSeconds) + "s", "--refresh-interval=10m",
               "--log-level=debug", "--peer-ttl=" + std::to_string(kPeerTtlSeconds) + "s",
               "--emulate-link==" + link(kNearGbps, kNearDelayMs),
               "--emulate-link=" + other_cluster + "/=" + link(kFarGbps, kFarDelayMs)}},
             {"env",
              {{{"name", "NODE_NAME"},
                {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
               {{"name", "POD_NAMESPACE"},
                {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}}}},
             {"ports", {{{"name", "probe"}, {"containerPort", port}, {"hostPort", port}}}},
             {"volumeMounts", {{{"name", "config"}, {"mountPath", "/etc/tessel-prober"}}}}}}},
          {"volumes", {{{"name", "config"}, {"secret", {{"secretName", "tessel-prober"}}}}}}}}};
  }

  // How `node`'s peers are named in its annotation.
  std::string peer_name(const GpuNode& node, const GpuNode& peer) const {
    return peer.member == node.member ? peer.name
                                      : federation_->member_name(peer.member) + "/" + peer.name;
  }

  // `node`'s annotation as the API holds it; nullopt when absent.
  std::optional<api::NodeLinks> links_of(const GpuNode& node) {
    const json object =
        federation_->member(node.member).admin().get(builtin("nodes"), "", node.name);
    const std::optional<std::string> value = kube::get_annotation(object, api::kLinksAnnotation);
    if (!value) return std::nullopt;
    return api::parse_node_links(*value, node.name);
  }

  std::map<std::string, uint16_t> ports_;
  std::optional<pid_t> stopped_;
};

TEST_F(ProberE2e, ProbersAnnotateTheirNodesThePlacementUsesThemAndAStoppedOneAgesOut) {
  const std::vector<GpuNode>& nodes = fleet_->nodes();

  // 1. Every node's annotation names its three peers, with what the emulated links allow.
  const auto started = std::chrono::steady_clock::now();
  const auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  std::map<std::string, api::NodeLinks> annotated;
  const bool all_annotated = wait_for(
      [&] {
        for (const GpuNode& node : nodes) {
          const std::optional<api::NodeLinks> links = links_of(node);
          if (!links || links->peers.size() != nodes.size() - 1) return false;
          annotated[node.name] = *links;
        }
        return true;
      },
      kAnnotatedTimeout);
  ASSERT_TRUE(all_annotated) << "not every node names its " << nodes.size() - 1 << " peers";
  std::cout << "every node annotated after " << since_start() << " s:\n";
  for (const auto& [node, links] : annotated)
    std::cout << "  " << node << ": " << api::format_node_links(links) << "\n";
  for (const GpuNode& node : nodes) {
    for (const GpuNode& peer : nodes) {
      if (peer.name == node.name) continue;
      const std::string name = peer_name(node, peer);
      const api::NodeLinks& links = annotated[node.name];
      ASSERT_TRUE(links.peers.count(name)) << node.name << " does not name " << name;
      const api::LinkMeasurement& m = links.peers.at(name);
      const bool far = peer.member != node.member;
      const double gbps = far ? kFarGbps : kNearGbps, delay_ms = far ? kFarDelayMs : kNearDelayMs;
      EXPECT_GT(m.bulk_gbps, 0.5 * gbps) << node.name << " -> " << name;
      EXPECT_LT(m.bulk_gbps, 1.15 * gbps) << node.name << " -> " << name;
      EXPECT_GE(m.rtt_p50_ms, 0.9 * delay_ms) << node.name << " -> " << name;
      EXPECT_LT(m.rtt_p50_ms, delay_ms + 30) << node.name << " -> " << name;
    }
  }

  // 2. Each member's peers ConfigMap (the operator's) lists the other member's probers.
  for (int m = 0; m < federation_->member_count(); ++m) {
    const json map = federation_->member(m).admin().get(
        builtin("configmaps"), federation_->namespace_name(), api::kProberPeersConfigMap);
    const api::ProberPeers peers = api::parse_prober_peers(
        map["data"][api::kProberPeersKey].get<std::string>(), "peers ConfigMap");
    std::set<std::string> listed, expected;
    for (const api::ProberPeer& peer : peers.peers) listed.insert(peer.name);
    for (const GpuNode& node : nodes)
      if (node.member != m)
        expected.insert(federation_->member_name(node.member) + "/" + node.name);
    EXPECT_EQ(listed, expected) << "member " << m;
  }

  // 3. The placement of a job over all four GPUs rests on the measured links.
  ASSERT_EQ(kubectl_ok({"apply", "-f", example_job("fables", 40)}),
            "trainingjob.tessel.dev/fables created\n");
  json links;
  const bool placed = wait_for(
      [&] {
        links = trainingjob("fables").value("/status/placement/links"_json_pointer, json());
        return links.is_array() && !links.empty();
      },
      kPlacedTimeout);
  ASSERT_TRUE(placed) << "no status.placement.links: " << trainingjob("fables").dump(1);
  bool crossed = false;
  for (const json& link : links) {
    const std::string from = link["from"], to = link["to"];
    const bool far = from.substr(0, from.find('/')) != to.substr(0, to.find('/'));
    crossed = crossed || far;
    EXPECT_EQ(link["source"], "measured") << link.dump();
    const double gbps = link["gbps"];
    EXPECT_GT(gbps, 0.5 * (far ? kFarGbps : kNearGbps)) << link.dump();
    EXPECT_LT(gbps, 1.15 * (far ? kFarGbps : kNearGbps)) << link.dump();
  }
  EXPECT_TRUE(crossed) << "four GPUs in two members, yet no link crosses them: " << links.dump();

  // 4. What kubectl-tessel shows of it: the placement with its measured links, the per-stage
  // figures once the stages report, and the members' link matrix.
  const auto plugin = [&](std::vector<std::string> args) {
    args.insert(args.begin(), KUBECTL_TESSEL_BINARY);
    for (const std::string& flag : {"--kubeconfig=" + federation_->hub().kubeconfig_path(),
                                    "--namespace=" + federation_->namespace_name()})
      args.push_back(flag);
    return run_process(args, std::chrono::seconds(60));
  };
  // The text fits a terminal (long names shortened); the JSON names every node.
  const ProcessResult placement = plugin({"placement", "fables"});
  EXPECT_EQ(placement.exit_code, 0) << placement.out << placement.err;
  EXPECT_NE(placement.out.find("measured"), std::string::npos) << placement.out;
  const ProcessResult placement_json = plugin({"placement", "fables", "-o", "json"});
  EXPECT_EQ(placement_json.exit_code, 0) << placement_json.err;
  for (const GpuNode& node : nodes)
    EXPECT_NE(placement_json.out.find(node.name), std::string::npos)
        << node.name << placement_json.out;
  std::string top;
  EXPECT_TRUE(wait_for(
      [&] {
        const ProcessResult shown = plugin({"top", "fables", "-o", "json"});
        top = shown.out + shown.err;
        return shown.exit_code == 0 &&
               json::parse(shown.out).value("stages", json::array()).size() == 2;
      },
      kPlacedTimeout))
      << "kubectl tessel top fables -o json:\n"
      << top;
  const ProcessResult matrix =
      plugin({"links", "-o", "json", "--operator-namespace=" + federation_->namespace_name()});
  EXPECT_EQ(matrix.exit_code, 0) << matrix.out << matrix.err;
  for (const GpuNode& node : nodes)
    EXPECT_NE(matrix.out.find(node.name), std::string::npos) << node.name << matrix.out;

  // 5. A prober that stops answering (its process stopped: its pod still Running, its port
  // still open) ages out of every peer's annotation.
  const GpuNode& gone = nodes.back();
  stopped_ = prober_pid(ports_.at(gone.name));
  ASSERT_TRUE(stopped_) << "no tessel-prober process listens on " << ports_.at(gone.name);
  ASSERT_EQ(::kill(*stopped_, SIGSTOP), 0);
  const double stopped_at = since_start();
  std::string still;
  const bool aged_out = wait_for(
      [&] {
        still.clear();
        for (const GpuNode& node : nodes) {
          if (node.name == gone.name) continue;
          const std::optional<api::NodeLinks> now = links_of(node);
          if (now && now->peers.count(peer_name(node, gone))) still += node.name + " ";
        }
        return still.empty();
      },
      kAgedOutTimeout);
  EXPECT_TRUE(aged_out) << "still naming " << gone.name << ": " << still;
  std::cout << gone.name << "'s prober stopped at " << stopped_at << " s, aged out of every "
            << "peer's annotation at " << since_start() << " s\n";
  // The others still name each other.
  for (const GpuNode& node : nodes) {
    if (node.name == gone.name) continue;
    const std::optional<api::NodeLinks> now = links_of(node);
    ASSERT_TRUE(now);
    EXPECT_EQ(now->peers.size(), nodes.size() - 2) << node.name;
  }
}

}  // namespace
}  // namespace tessel::testing
