// Probers against one API server: three ProberDaemons in this process, each for its own Node,
// find each other through their pods (created as objects; the test plays the kubelet through
// the status subresource), measure each other over loopback and annotate their Nodes. A stopped
// prober ages out of the others' annotations; a peers ConfigMap adds a cross-cluster peer (a
// ProbeServer of the test), and a broken one keeps the last good peers; a busy peer is tried
// again soon, never counted as a failure; a Node patch that fails is retried; the tessel-prober
// binary does the same and stops cleanly on SIGTERM.
#include "noderuntime/prober/app/prober_daemon.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/link_annotations.h"
#include "api/prober_peers.h"
#include "kube/log.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/prober/probe_handshake.h"
#include "noderuntime/prober/probe_server.h"
#include "noderuntime/transport/socket.h"
#include "tests/held_port.h"
#include "tests/kubectl/child_process.h"
#include "tests/prober/prober_test_support.h"
#include "tests/support/test_cluster.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kSecret = "tessel-prober-daemon-test-secret";
// Generous: each bound only runs out when the code under test is broken.
constexpr auto kTimeout = 90s;

const kube::ResourceInfo& resource(const char* kind) {
  static const kube::ResourceRegistry registry;
  return *registry.find_kind("v1", kind);
}

// Every log line of the daemons, for the checks on what they logged and for failure reports.
class LogCapture {
 public:
  std::shared_ptr<const kube::Logger> logger(const std::string& node) {
    return std::make_shared<const kube::Logger>(
        kube::Logger("tessel-prober", kube::LogLevel::kDebug, [this](std::string_view line) {
          std::lock_guard lock(mutex_);
          lines_.emplace_back(line);
        }).with({{"self", node}}));
  }
  bool contains(const std::vector<std::string>& parts) const {
    std::lock_guard lock(mutex_);
    for (const std::string& line : lines_) {
      bool all = true;
      for (const std::string& part : parts) all = all && line.find(part) != std::string::npos;
      if (all) return true;
    }
    return false;
  }
  std::string tail(size_t count = 60) const {
    std::lock_guard lock(mutex_);
    std::string out;
    for (size_t i = lines_.size() > count ? lines_.size() - count : 0; i < lines_.size(); ++i) {
      out += lines_[i] + "\n";
    }
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

ProbeOptions quick_probe() {
  ProbeOptions options;
  options.secret = kSecret;
  options.round_trips = 20;
  options.small_messages = 4;
  options.bulk_message_bytes = 1024 * 1024;
  options.bulk_duration = 100ms;
  return options;
}

class ProberDaemons : public ::testing::Test {
 protected:
  struct Prober {
    std::string node;
    std::shared_ptr<kube::Client> client;
    std::unique_ptr<ProberDaemon> daemon;
    std::jthread thread;
  };

  void TearDown() override {
    probers_.clear();  // stops the daemons (each jthread requests stop and joins)
    for (const std::string& node : nodes_) {
      try {
        cluster_.admin().remove(resource("Node"), "", node);
      } catch (const std::exception&) {
        // best effort: a test server goes with the test anyway
      }
    }
    if (HasFailure()) std::cerr << "daemon logs (last lines):\n" << logs_.tail();
  }

  const std::string& ns() const { return cluster_.namespace_name(); }

  void create_node(const std::string& node) {
    cluster_.admin().create(
        resource("Node"), "",
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata", {{"name", node}, {"annotations", {{"example.com/keep", "yes"}}}}}});
    nodes_.push_back(node);
  }

  // A ProberDaemon for `node` on a free loopback port, running on a thread of its own.
  ProberDaemon& start_daemon(const std::string& node,
                             const std::function<void(ProberDaemonOptions&)>& adjust = {}) {
    auto prober = std::make_unique<Prober>();
    prober->node = node;
    prober->client = cluster_.client();
    ProberDaemonOptions options;
    options.node_name = node;
    options.namespace_name = ns();
    options.listen_host = "127.0.0.1";
    options.listen_port = 0;
    options.probe = quick_probe();
    options.schedule.check_interval = 1s;
    options.schedule.refresh_interval = 30s;
    options.schedule.min_full_interval = 10s;
    options.book.peer_ttl = 4s;
    options.reevaluate_every = 100ms;
    options.publish_retry_initial = 100ms;
    options.publish_retry_max = 1s;
    options.logger = logs_.logger(node);
    if (adjust) adjust(options);
    prober->daemon = std::make_unique<ProberDaemon>(*prober->client, options);
    ProberDaemon& daemon = *prober->daemon;
    prober->thread = std::jthread([&daemon](std::stop_token stop) { daemon.run(stop); });
    probers_.push_back(std::move(prober));
    return daemon;
  }

  // The prober pod of `node`, Running on 127.0.0.1 with its probe port.
  void create_prober_pod(const std::string& pod, const std::string& node, uint16_t probe_port) {
    const json port = {
        {"name", api::kProbePortName}, {"containerPort", probe_port}, {"protocol", "TCP"}};
    const json container = {
        {"name", "prober"}, {"image", "tessel/prober:test"}, {"ports", json::array({port})}};
    json manifest = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    manifest["metadata"] = {{"name", pod},
                            {"namespace", ns()},
                            {"labels", {{"app.kubernetes.io/name", "tessel-prober"}}}};
    manifest["spec"] = {{"nodeName", node}, {"containers", json::array({container})}};
    cluster_.admin().create(resource("Pod"), ns(), manifest);
    // The test plays the kubelet (the API test server has none): status through its subresource.
    cluster_.admin().patch(resource("Pod"), ns(), pod, kube::PatchType::kMerge,
                           {{"status", {{"phase", "Running"}, {"podIP", "127.0.0.1"}}}}, {},
                           "status");
  }

  // A Node, its ProberDaemon and its prober pod "tessel-prober-<index>".
  void start_prober(int index) {
    const std::string node = ns() + "-gpu-" + std::to_string(index);
    create_node(node);
    const uint16_t port = start_daemon(node).port();
    create_prober_pod("tessel-prober-" + std::to_string(index), node, port);
  }

  // A ProbeServer standing for another cluster's prober, listed in the peers ConfigMap.
  std::unique_ptr<ProbeServer> start_cross_peer(
      const std::string& name,
      std::chrono::milliseconds io_timeout = ProbeServerOptions{}.io_timeout) {
    auto server = start_probe_server(kSecret, io_timeout);
    api::ProberPeers peers;
    peers.cluster = "member-a";
    peers.peers = {{name, "127.0.0.1", server->port()}};
    put_peers_config_map(api::format_prober_peers(peers));
    return server;
  }

  // The peers named in `node`'s links annotation (nullopt: none yet).
  std::optional<api::NodeLinks> links_of(const std::string& node) const {
    const json object = cluster_.admin().get(resource("Node"), "", node);
    const json annotations = object["metadata"].value("annotations", json::object());
    if (!annotations.contains(api::kLinksAnnotation)) return std::nullopt;
    return api::parse_node_links(annotations[api::kLinksAnnotation].get<std::string>(), node);
  }

  bool names(const std::string& node, const std::vector<std::string>& peers,
             const std::vector<std::string>& not_peers = {}) const {
    const auto links = links_of(node);
    if (!links) return false;
    for (const std::string& peer : peers) {
      if (links->peers.count(peer) == 0) return false;
    }
    for (const std::string& peer : not_peers) {
      if (links->peers.count(peer) != 0) return false;
    }
    return true;
  }

  void put_peers_config_map(const std::string& text) {
    const json config_map = {
        {"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata", {{"name", api::kProberPeersConfigMap}, {"namespace", ns()}}},
        {"data", {{api::kProberPeersKey, text}}}};
    try {
      cluster_.admin().create(resource("ConfigMap"), ns(), config_map);
    } catch (const kube::ApiError& e) {
      if (!e.is_already_exists()) throw;
      cluster_.admin().patch(resource("ConfigMap"), ns(), api::kProberPeersConfigMap,
                             kube::PatchType::kMerge, {{"data", config_map["data"]}});
    }
  }

  testing::TestCluster cluster_;
  LogCapture logs_;
  std::vector<std::string> nodes_;
  std::vector<std::unique_ptr<Prober>> probers_;
};

TEST_F(ProberDaemons, MeasureEachOtherAndAStoppedOneAgesOut) {
  for (int i = 0; i < 3; ++i) start_prober(i);
  const std::string a = probers_[0]->node, b = probers_[1]->node, c = probers_[2]->node;

  ASSERT_TRUE(eventually([&] {
    return names(a, {b, c}) && names(b, {a, c}) && names(c, {a, b});
  })) << "the Nodes' annotations never named every other prober";
  for (const auto& prober : probers_) {
    const api::NodeLinks links = *links_of(prober->node);
    EXPECT_EQ(links.peers.size(), 2u);
    for (const auto& [peer, m] : links.peers) {
      EXPECT_GT(m.rtt_p50_ms, 0) << prober->node << " -> " << peer;
      EXPECT_GE(m.rtt_p90_ms, m.rtt_p50_ms) << prober->node << " -> " << peer;
      EXPECT_GT(m.bulk_gbps, 0) << prober->node << " -> " << peer;
      EXPECT_FALSE(m.measured_at.empty());
    }
    // The patch touched nothing else.
    const json node = cluster_.admin().get(resource("Node"), "", prober->node);
    EXPECT_EQ(node["metadata"]["annotations"]["example.com/keep"], "yes");
  }
  EXPECT_TRUE(logs_.contains({"published links", "peers=2"})) << logs_.tail();

  // The third prober stops (its pod stays, as after a crash the kubelet has not seen yet): the
  // others' probes fail and it ages out of their annotations.
  probers_.pop_back();
  ASSERT_TRUE(eventually([&] { return names(a, {b}, {c}) && names(b, {a}, {c}); }))
      << "the stopped prober never aged out";
  EXPECT_TRUE(logs_.contains({"peer aged out", "peer=" + c})) << logs_.tail();

  // Its pod deleted: it leaves the directory (it is not probed again).
  cluster_.admin().remove(resource("Pod"), ns(), "tessel-prober-2");
  EXPECT_TRUE(eventually([&] {
    return logs_.contains({"peer left", "peer=" + c});
  })) << logs_.tail();
}

TEST_F(ProberDaemons, ThePeersConfigMapAddsCrossClusterPeersAndABrokenOneKeepsThem) {
  start_prober(0);
  const std::string a = probers_[0]->node;
  const std::unique_ptr<ProbeServer> member_b = start_cross_peer("member-b/x");
  ASSERT_TRUE(eventually([&] { return names(a, {"member-b/x"}); }))
      << "the cross-cluster peer never showed up";
  EXPECT_TRUE(logs_.contains({"cross-cluster peers read", "cluster=member-a", "peers=1"}))
      << logs_.tail();

  // A broken ConfigMap is refused, naming it, and member-b/x stays a peer: still probed.
  put_peers_config_map(R"({"version":1,"cluster":"member-a","peers":[{"name":"no-cluster"}]})");
  const std::string key = ns() + "/" + api::kProberPeersConfigMap;
  ASSERT_TRUE(eventually([&] {
    return logs_.contains({"peers ConfigMap refused", "configmap=" + key, "kept_peers=1"});
  })) << logs_.tail();
  const size_t sessions = member_b->sessions_completed();
  EXPECT_TRUE(eventually([&] { return member_b->sessions_completed() > sessions + 1; }))
      << "member-b/x is no longer probed after a broken ConfigMap";
  EXPECT_TRUE(names(a, {"member-b/x"}));

  // The ConfigMap deleted: no cross-cluster peers.
  cluster_.admin().remove(resource("ConfigMap"), ns(), api::kProberPeersConfigMap);
  EXPECT_TRUE(eventually([&] { return logs_.contains({"peers ConfigMap gone"}); })) << logs_.tail();
  EXPECT_TRUE(eventually([&] {
    return logs_.contains({"peer left", "peer=member-b/x"});
  })) << logs_.tail();
  EXPECT_TRUE(eventually([&] { return names(a, {}, {"member-b/x"}); }))
      << "the annotation still names a peer no longer listed";
}

TEST_F(ProberDaemons, AFailedPatchIsLoggedAndRetriedNeverFatal) {
  // The daemon's Node does not exist yet: every patch is a 404 until it does.
  const std::string node = ns() + "-late-node";
  start_daemon(node);
  const std::unique_ptr<ProbeServer> member_b = start_cross_peer("member-b/x");
  ASSERT_TRUE(eventually([&] {
    return logs_.contains({"publishing links failed; will retry", "node=" + node, "not found"});
  })) << logs_.tail();
  create_node(node);
  EXPECT_TRUE(eventually([&] { return names(node, {"member-b/x"}); }))
      << "the links were never published once the Node existed";
}

TEST_F(ProberDaemons, ARestartedProberResumesWhatItsNodeStillHolds) {
  // What the previous run published: a peer still listed, measured a second ago; one measured an
  // hour ago; one no longer listed.
  const std::string node = ns() + "-restarted";
  create_node(node);
  const auto at = [](std::chrono::seconds ago) {
    return kube::format_rfc3339(std::chrono::system_clock::now() - ago);
  };
  api::NodeLinks before;
  before.peers["member-b/x"] = {123, 130, 0.5, 0.9, at(1s)};
  before.peers["member-b/old"] = {5, 6, 0.5, 0.9, at(3600s)};
  before.peers["member-b/gone"] = {5, 6, 0.5, 0.9, at(1s)};
  cluster_.admin().patch(
      resource("Node"), "", node, kube::PatchType::kMerge,
      {{"metadata", {{"annotations", {{api::kLinksAnnotation, api::format_node_links(before)}}}}}});
  // member-b/x and member-b/old are listed but do not answer (a port held, where nothing
  // listens and nobody else can): nothing replaces the resumed value before the test reads it
  // (the next probe is a check interval away).
  const testing::HeldPort closed;
  const uint16_t closed_port = closed.port();
  api::ProberPeers peers;
  peers.cluster = "member-a";
  peers.peers = {{"member-b/old", "127.0.0.1", closed_port},
                 {"member-b/x", "127.0.0.1", closed_port}};
  put_peers_config_map(api::format_prober_peers(peers));

  start_daemon(node, [](ProberDaemonOptions& options) {
    options.schedule.check_interval = 60s;
    options.schedule.refresh_interval = 600s;
    options.book.peer_ttl = 600s;
  });
  ASSERT_TRUE(eventually([&] {
    return logs_.contains({"resumed the links published before", "node=" + node, "peers=1"});
  })) << logs_.tail();
  ASSERT_TRUE(eventually([&] {
    return names(node, {"member-b/x"}, {"member-b/old", "member-b/gone"});
  })) << logs_.tail();
  EXPECT_EQ(links_of(node)->peers.at("member-b/x"), before.peers.at("member-b/x"));
}

TEST_F(ProberDaemons, ABusyPeerIsTriedAgainSoonAndIsNoFailure) {
  const std::string node = ns() + "-busy";
  create_node(node);
  // member-b/x serves another prober's session for as long as the test holds it.
  const std::unique_ptr<ProbeServer> member_b = start_cross_peer("member-b/x", 600'000ms);
  auto fd = transport::connect_until("127.0.0.1", member_b->port(),
                                     std::chrono::steady_clock::now() + kTimeout);
  transport::set_tcp_nodelay(fd.get());
  ProbeChannel holder(std::move(fd), "holder", 5000ms);
  authenticate_to_server(holder, kSecret, "member-b/y");

  start_daemon(node);
  // Refused, and tried again within seconds (not after a failure's back-off).
  ASSERT_TRUE(eventually([&] { return member_b->busy_refusals() >= 3; })) << logs_.tail();
  EXPECT_TRUE(logs_.contains({"peer busy; probe postponed", "peer=member-b/x", "retry_in_ms="}))
      << logs_.tail();
  EXPECT_FALSE(logs_.contains({"probe failed"})) << logs_.tail();

  holder.send(FrameType::kBye);  // the other session ends: the daemon's probe gets through
  EXPECT_TRUE(eventually([&] { return names(node, {"member-b/x"}); })) << logs_.tail();
  EXPECT_FALSE(logs_.contains({"probe failed"})) << logs_.tail();
}

// The binary: flags, kubeconfig and secret file in, its Node annotated, SIGTERM a clean exit.
TEST_F(ProberDaemons, TheBinaryAnnotatesItsNodeAndStopsCleanlyOnSigterm) {
  const std::string node = ns() + "-gpu-bin";
  create_node(node);
  const std::unique_ptr<ProbeServer> member_b = start_cross_peer("member-b/x");
  const std::string secret_file =
      ::testing::TempDir() + "tessel-prober-secret-" + std::to_string(getpid()) + "-" + ns();
  std::ofstream(secret_file) << kSecret << "\n";
  const testing::HeldPort port;  // held until the prober binds it, not picked and released
  testing::ChildProcess prober({TESSEL_PROBER_BINARY, "--kubeconfig", cluster_.kubeconfig_path(),
                                "--node-name", node, "--namespace", ns(), "--listen",
                                port.address(), "--secret-file", secret_file, "--check-interval",
                                "1s", "--refresh-interval", "10s", "--peer-ttl", "5s",
                                "--emulate-link", "member-b/=0/5"});
  const bool annotated = eventually([&] {
    prober.read_until([](const std::string&) { return false; }, 50ms);  // drains its logs
    return names(node, {"member-b/x"});
  });
  const testing::ProcessResult result = prober.stop(30s);
  std::remove(secret_file.c_str());
  ASSERT_TRUE(annotated) << "tessel-prober never annotated its Node; its log:\n" << result.err;
  // --emulate-link delays this side's sends by 5 ms: every round trip takes at least that.
  EXPECT_GE(links_of(node)->peers.at("member-b/x").rtt_p50_ms, 5.0);
  EXPECT_FALSE(result.timed_out) << result.err;
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("prober stopping"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("published links"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace tessel::prober
