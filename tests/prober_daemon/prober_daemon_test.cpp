// Probers against one API server: three ProberDaemons in this process, each for its own Node,
// find each other through their pods (created as objects; the test plays the kubelet through
// the status subresource), measure each other over loopback and annotate their Nodes. A stopped
// prober ages out of the others' annotations; a peers ConfigMap adds a cross-cluster peer (a
// ProbeServer of the test), and a broken one keeps the last good peers.
#include "noderuntime/prober/app/prober_daemon.h"

#include <gtest/gtest.h>

#include <chrono>
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
#include "kube/resource.h"
#include "noderuntime/prober/probe_server.h"
#include "noderuntime/transport/socket.h"
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

  // A Node, a ProberDaemon for it on a free loopback port, and its prober pod, Running.
  void start_prober(int index) {
    const std::string node = ns() + "-gpu-" + std::to_string(index);
    cluster_.admin().create(
        resource("Node"), "",
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata", {{"name", node}, {"annotations", {{"example.com/keep", "yes"}}}}}});
    nodes_.push_back(node);

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
    options.logger = logs_.logger(node);
    prober->daemon = std::make_unique<ProberDaemon>(*prober->client, options);
    ProberDaemon& daemon = *prober->daemon;
    prober->thread = std::jthread([&daemon](std::stop_token stop) { daemon.run(stop); });

    const std::string pod = "tessel-prober-" + std::to_string(index);
    const json port = {
        {"name", api::kProbePortName}, {"containerPort", daemon.port()}, {"protocol", "TCP"}};
    const json container = {
        {"name", "prober"}, {"image", "tessel/prober:test"}, {"ports", json::array({port})}};
    json manifest = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    manifest["metadata"] = {{"name", pod},
                            {"namespace", ns()},
                            {"labels", {{"app.kubernetes.io/name", "tessel-prober"}}}};
    manifest["spec"] = {{"nodeName", node}, {"containers", json::array({container})}};
    cluster_.admin().create(resource("Pod"), ns(), manifest);
    // The test plays the kubelet: the pod runs on 127.0.0.1.
    cluster_.admin().patch(resource("Pod"), ns(), pod, kube::PatchType::kMerge,
                           {{"status", {{"phase", "Running"}, {"podIP", "127.0.0.1"}}}}, {},
                           "status");
    probers_.push_back(std::move(prober));
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
  ProbeServerOptions server_options;
  server_options.secret = kSecret;
  ProbeServer member_b(transport::TcpListener::bind("127.0.0.1", 0), server_options);

  api::ProberPeers peers;
  peers.cluster = "member-a";
  peers.peers = {{"member-b/x", "127.0.0.1", member_b.port()}};
  put_peers_config_map(api::format_prober_peers(peers));
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
  const size_t sessions = member_b.sessions_completed();
  EXPECT_TRUE(eventually([&] { return member_b.sessions_completed() > sessions + 1; }))
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

}  // namespace
}  // namespace tessel::prober
