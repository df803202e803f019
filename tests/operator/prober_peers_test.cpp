// The cross-cluster peers ConfigMap the operator keeps in each member: what it should list
// (pure), and the MemberCluster reconciler keeping it with two members on API test servers: each
// lists the other's probers (ExternalIP or pod IP, hostPort or containerPort) and follows a new
// ExternalIP; a prober pod that goes, or a member that goes, leaves the lists; nothing is written
// when nothing changed; a ConfigMap of that name the operator does not manage is left alone; a
// member refusing the write holds up no other.
#include "operator/controller/prober_peers.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "api/prober_peers.h"
#include "operator/controller/prober_peers_writer.h"
#include "tests/operator/membercluster_reconciler_fixture.h"

namespace tessel::controller {
namespace {

using namespace member_testing;
using nlohmann::json;

TEST(ProberPeersDesired, ExternalIpIsTheNodesFirstExternalAddress) {
  const json node = {{"status",
                      {{"addresses",
                        {{{"type", "InternalIP"}, {"address", "10.0.0.1"}},
                         {{"type", "ExternalIP"}, {"address", "203.0.113.7"}},
                         {{"type", "ExternalIP"}, {"address", "203.0.113.8"}}}}}}};
  EXPECT_EQ(external_ip(node), "203.0.113.7");
  EXPECT_EQ(external_ip(
                {{"status", {{"addresses", {{{"type", "InternalIP"}, {"address", "10.0.0.1"}}}}}}}),
            std::nullopt);
  EXPECT_EQ(external_ip(json::object()), std::nullopt);
  EXPECT_EQ(external_ip({{"status", {{"addresses", "garbage"}}}}), std::nullopt);
}

TEST(ProberPeersDesired, EachMemberListsTheOthersProbersSortedAndNotItsOwn) {
  const std::vector<api::ProberPeer> b =
      member_probers("member-b", {{"gpu-1", "10.1.0.1", 7471}, {"gpu-2", "10.1.0.2", 17471}},
                     {{"gpu-2", "203.0.113.2"}});
  EXPECT_EQ(b, (std::vector<api::ProberPeer>{{"member-b/gpu-1", "10.1.0.1", 7471},
                                             {"member-b/gpu-2", "203.0.113.2", 17471}}));
  const std::map<std::string, std::vector<api::ProberPeer>> probers = {
      {"member-a", member_probers("member-a", {{"gpu-9", "10.0.0.9", 7471}}, {})},
      {"member-b", b},
      {"member-c", member_probers("member-c", {{"a-node", "10.2.0.1", 7471}}, {})}};
  const DesiredProberPeers for_a = prober_peers_for("member-a", probers);
  EXPECT_EQ(for_a.left_out, 0u);
  EXPECT_EQ(for_a.peers.cluster, "member-a");
  EXPECT_EQ(for_a.peers.peers,
            (std::vector<api::ProberPeer>{{"member-b/gpu-1", "10.1.0.1", 7471},
                                          {"member-b/gpu-2", "203.0.113.2", 17471},
                                          {"member-c/a-node", "10.2.0.1", 7471}}));
  EXPECT_EQ(prober_peers_for("member-b", probers).peers.peers.size(), 2u);
  // The only member has no peers elsewhere: an empty list, still a valid document.
  const DesiredProberPeers alone = prober_peers_for("member-a", {{"member-a", {}}});
  EXPECT_TRUE(alone.peers.peers.empty());
  EXPECT_EQ(api::parse_prober_peers(api::format_prober_peers(alone.peers), "test"), alone.peers);
}

TEST(ProberPeersDesired, TheListStaysWithinTheFormatsLimits) {
  std::vector<api::ProberEndpoint> many;
  for (size_t i = 0; i < api::kMaxProberPeers + 7; ++i)
    many.push_back({"n" + std::to_string(100000 + i), "10.0.0.1", 7471});
  const DesiredProberPeers counted =
      prober_peers_for("member-a", {{"member-b", member_probers("member-b", many, {})}});
  EXPECT_EQ(counted.peers.peers.size(), api::kMaxProberPeers);
  EXPECT_EQ(counted.left_out, 7u);
  EXPECT_EQ(counted.peers.peers.back().name,
            "member-b/n" + std::to_string(100000 + api::kMaxProberPeers - 1));
  EXPECT_NO_THROW(api::parse_prober_peers(api::format_prober_peers(counted.peers), "test"));

  // Long DNS names: the byte limit binds before the count.
  std::vector<api::ProberEndpoint> long_names;
  const std::string label(60, 'x');
  for (size_t i = 0; i < 4000; ++i)
    long_names.push_back(
        {label + "." + label + "." + label + "." + std::to_string(1000 + i), "10.0.0.1", 7471});
  const DesiredProberPeers sized =
      prober_peers_for("member-a", {{"member-b", member_probers("member-b", long_names, {})}});
  EXPECT_GT(sized.left_out, 0u);
  EXPECT_EQ(sized.peers.peers.size() + sized.left_out, long_names.size());
  const std::string text = api::format_prober_peers(sized.peers);
  EXPECT_LE(text.size(), api::kMaxProberPeersBytes);
  EXPECT_GT(text.size(), api::kMaxProberPeersBytes - 400);  // filled, not cut early
  EXPECT_NO_THROW(api::parse_prober_peers(text, "test"));
}

TEST(ProberPeersDesired, TheConfigMapIsLabelledAsTheOperatorsOfThisHub) {
  const json configmap = prober_peers_configmap("tessel-system", "hub-1", {"member-a", {}});
  EXPECT_EQ(configmap["metadata"]["name"], "tessel-prober-peers");
  EXPECT_EQ(configmap["metadata"]["namespace"], "tessel-system");
  EXPECT_EQ(
      configmap["metadata"]["labels"],
      (json{{"app.kubernetes.io/managed-by", "tessel-operator"}, {"tessel.dev/hub", "hub-1"}}));
  EXPECT_EQ(configmap["data"]["peers.json"], R"({"version":1,"cluster":"member-a","peers":[]})");
}

TEST(ProberPeersRegistryOptions, TheProberSelectorAndNamespaceAreChecked) {
  MemberRegistry::Options options;
  options.prober_selector = "x in (a";
  try {
    MemberRegistry registry(options, {}, {});
    FAIL() << "accepted prober selector " << options.prober_selector;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("prober selector 'x in (a' is not a label selector"),
              std::string::npos)
        << error.what();
  }
  options.prober_selector = api::kProberSelector;
  options.prober_namespace = "";
  EXPECT_THROW(MemberRegistry(options, {}, {}), std::invalid_argument);
}

// A member API test server with GPU nodes and prober pods.
class ProberPeersConfigMapTest : public MemberClusterReconcilerTest {
 protected:
  // A prober pod on `node` in the member's namespace (the registry's prober namespace), made
  // Running with `ip` as a kubelet would; `port` is its probe port entry.
  static void run_prober(kube::Client& member, const std::string& ns, const std::string& name,
                         const std::string& node, const std::string& ip, const json& port) {
    json pod = gpu_pod(ns, name, node, 0, {{"app.kubernetes.io/name", "tessel-prober"}});
    pod["spec"]["containers"][0] = {
        {"name", "prober"}, {"image", "tessel/prober:0.1.0"}, {"ports", json::array({port})}};
    member.create(core("pods"), ns, pod);
    json live = member.get(core("pods"), ns, name);
    live["status"] = {{"phase", "Running"}, {"podIP", ip}, {"hostIP", ip}};
    member.update_status(core("pods"), live);
  }

  static json probe_port(int container_port, int host_port = 0) {
    json port = {{"name", "probe"}, {"containerPort", container_port}, {"protocol", "TCP"}};
    if (host_port > 0) port["hostPort"] = host_port;
    return port;
  }

  // The member's peers ConfigMap, null when absent.
  static json peers_configmap(kube::Client& member, const std::string& ns) {
    try {
      return member.get(core("configmaps"), ns, api::kProberPeersConfigMap);
    } catch (const kube::ApiError& e) {
      if (e.is_not_found()) return nullptr;
      throw;
    }
  }

  // Reconciles `names` until member `cluster`'s ConfigMap lists exactly `want`.
  bool lists(const std::vector<std::string>& names, kube::Client& cluster, const std::string& ns,
             const std::vector<api::ProberPeer>& want, json& last) {
    return eventually([&] {
      for (const std::string& name : names) reconciler_->reconcile(name);
      last = peers_configmap(cluster, ns);
      if (last.is_null()) return false;
      return api::parse_prober_peers(last["data"]["peers.json"].get<std::string>(), "test").peers ==
             want;
    });
  }

  // Writes (POST, PUT, PATCH) to ConfigMaps the member's server has served.
  static size_t configmap_writes(const TestCluster& member) {
    const std::vector<std::string> log = member.server()->request_log();
    return std::count_if(log.begin(), log.end(), [](const std::string& line) {
      return line.find("/configmaps") != std::string::npos &&
             (line.starts_with("POST ") || line.starts_with("PUT ") || line.starts_with("PATCH "));
    });
  }
};

TEST_F(ProberPeersConfigMapTest, EachMemberListsTheOthersProbersAndFollowsTheirChanges) {
  const auto a = TestCluster::member(0, hub_.namespace_name());
  const auto b = TestCluster::member(1, hub_.namespace_name());
  TESSEL_REQUIRE_TEST_SERVER(*a, "the request log");
  const std::string ns = hub_.namespace_name();
  register_gpu_node(a->admin(), "gpu-1", 8);
  register_gpu_node(b->admin(), "gpu-1", 8);
  register_gpu_node(b->admin(), "gpu-2", 8);
  // gpu-2 of b has an ExternalIP: the other clusters dial that.
  json node = b->admin().get(core("nodes"), "", "gpu-2");
  node["status"]["addresses"].push_back({{"type", "ExternalIP"}, {"address", "203.0.113.2"}});
  b->admin().update_status(core("nodes"), node);
  run_prober(a->admin(), ns, "prober-a1", "gpu-1", "10.0.0.1", probe_port(7471));
  run_prober(b->admin(), ns, "prober-b1", "gpu-1", "10.1.0.1", probe_port(7471));
  run_prober(b->admin(), ns, "prober-b2", "gpu-2", "10.1.0.2", probe_port(7471, 17471));
  // Not probers: a pod without the label, and a prober not Running yet.
  b->admin().create(core("pods"), ns, gpu_pod(ns, "stage", "gpu-1", 1));
  b->admin().create(
      core("pods"), ns,
      gpu_pod(ns, "prober-pending", "gpu-2", 0, {{"app.kubernetes.io/name", "tessel-prober"}}));

  const std::string ma = add_member("a", a->self_contained_kubeconfig());
  const std::string mb = add_member("b", b->self_contained_kubeconfig());
  reconcile_until({{ma, {"True", "Connected"}}, {mb, {"True", "Connected"}}});
  json in_a, in_b;
  ASSERT_TRUE(lists({ma, mb}, a->admin(), ns,
                    {{mb + "/gpu-1", "10.1.0.1", 7471}, {mb + "/gpu-2", "203.0.113.2", 17471}},
                    in_a))
      << in_a;
  ASSERT_TRUE(lists({ma, mb}, b->admin(), ns, {{ma + "/gpu-1", "10.0.0.1", 7471}}, in_b)) << in_b;
  EXPECT_EQ(in_a["metadata"]["labels"]["app.kubernetes.io/managed-by"], "tessel-operator");
  EXPECT_EQ(in_a["metadata"]["labels"]["tessel.dev/hub"], "hub-1");
  EXPECT_EQ(api::parse_prober_peers(in_a["data"]["peers.json"].get<std::string>(), "test").cluster,
            ma);
  // The registry told of both members' probers (first lists and pod changes).
  EXPECT_GT(probers_heard(ma), 0);
  EXPECT_GT(probers_heard(mb), 0);

  // Nothing changed: nothing is written, however often it is reconciled.
  const size_t writes_a = configmap_writes(*a), writes_b = configmap_writes(*b);
  const json version_a = in_a["metadata"]["resourceVersion"];
  for (int i = 0; i < 3; ++i) {
    reconciler_->reconcile(ma);
    reconciler_->reconcile(mb);
  }
  EXPECT_EQ(configmap_writes(*a), writes_a);
  EXPECT_EQ(configmap_writes(*b), writes_b);
  EXPECT_EQ(peers_configmap(a->admin(), ns)["metadata"]["resourceVersion"], version_a);

  // a's gpu-1 gets an ExternalIP: the registry hears it, and b's list dials that.
  const int heard_a = probers_heard(ma);
  json node_a = a->admin().get(core("nodes"), "", "gpu-1");
  node_a["status"]["addresses"].push_back({{"type", "ExternalIP"}, {"address", "198.51.100.1"}});
  a->admin().update_status(core("nodes"), node_a);
  EXPECT_TRUE(eventually([&] { return probers_heard(ma) > heard_a; }));
  ASSERT_TRUE(lists({mb}, b->admin(), ns, {{ma + "/gpu-1", "198.51.100.1", 7471}}, in_b)) << in_b;

  // A prober pod of b goes: the registry hears it, and a's list drops it.
  const int heard_b = probers_heard(mb);
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  b->admin().remove(core("pods"), ns, "prober-b1", now);
  EXPECT_TRUE(eventually([&] { return probers_heard(mb) > heard_b; }));
  ASSERT_TRUE(lists({ma}, a->admin(), ns, {{mb + "/gpu-2", "203.0.113.2", 17471}}, in_a)) << in_a;

  // A ConfigMap deleted by hand comes back.
  a->admin().remove(core("configmaps"), ns, api::kProberPeersConfigMap);
  ASSERT_TRUE(lists({ma}, a->admin(), ns, {{mb + "/gpu-2", "203.0.113.2", 17471}}, in_a)) << in_a;

  // Member b goes: the registry hears it, and its probers leave a's list.
  const int heard_gone = probers_heard(mb);
  hub_.admin().remove(members_resource_, "", mb);
  ASSERT_TRUE(eventually([&] { return member_informer_->store().get(mb) == nullptr; }));
  reconciler_->reconcile(mb);
  EXPECT_GT(probers_heard(mb), heard_gone);
  ASSERT_TRUE(lists({ma}, a->admin(), ns, {}, in_a)) << in_a;
}

TEST_F(ProberPeersConfigMapTest, AConfigMapTheOperatorDoesNotManageIsLeftAlone) {
  const auto a = TestCluster::member(0, hub_.namespace_name());
  const auto b = TestCluster::member(1, hub_.namespace_name());
  const auto c = TestCluster::member(2, hub_.namespace_name());
  TESSEL_REQUIRE_TEST_SERVER(*a, "exact ConfigMaps: a real member may hold its own");
  const std::string ns = hub_.namespace_name();
  for (const auto* m : {a.get(), b.get(), c.get()}) {
    register_gpu_node(m->admin(), "gpu-1", 8);
    run_prober(m->admin(), ns, "prober", "gpu-1", "10.0.0.1", probe_port(7471));
  }
  // b holds a hand-made one; c one of another hub's operator.
  const json hand_made = {{"apiVersion", "v1"},
                          {"kind", "ConfigMap"},
                          {"metadata", {{"name", api::kProberPeersConfigMap}, {"namespace", ns}}},
                          {"data", {{"peers.json", "mine"}}}};
  b->admin().create(core("configmaps"), ns, hand_made);
  c->admin().create(core("configmaps"), ns,
                    prober_peers_configmap(ns, "another-hub", {"someone", {}}));
  const json b_before = peers_configmap(b->admin(), ns);
  const json c_before = peers_configmap(c->admin(), ns);

  const std::string ma = add_member("a", a->self_contained_kubeconfig());
  const std::string mb = add_member("b", b->self_contained_kubeconfig());
  const std::string mc = add_member("c", c->self_contained_kubeconfig());
  reconcile_until({{ma, {"True", ""}}, {mb, {"True", ""}}, {mc, {"True", ""}}});
  json in_a;
  ASSERT_TRUE(lists({ma, mb, mc}, a->admin(), ns,
                    {{mb + "/gpu-1", "10.0.0.1", 7471}, {mc + "/gpu-1", "10.0.0.1", 7471}}, in_a))
      << in_a;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(reconciler_->reconcile(mb).requeue_after, std::chrono::milliseconds(30'000));
    reconciler_->reconcile(mc);
  }
  EXPECT_EQ(peers_configmap(b->admin(), ns), b_before);
  EXPECT_EQ(peers_configmap(c->admin(), ns), c_before);
  EXPECT_EQ(configmap_writes(*b), 1u);  // the test's own
  EXPECT_EQ(configmap_writes(*c), 1u);

  // The writer says why it left each alone.
  const json desired = prober_peers_configmap(ns, "hub-1", {"x", {}});
  const PeersWriteResult mine = write_prober_peers(b->admin(), desired);
  EXPECT_EQ(mine.outcome, PeersWrite::kNotOurs);
  EXPECT_EQ(mine.why, "its label app.kubernetes.io/managed-by is missing, not 'tessel-operator'");
  const PeersWriteResult theirs = write_prober_peers(c->admin(), desired);
  EXPECT_EQ(theirs.outcome, PeersWrite::kNotOurs);
  EXPECT_EQ(theirs.why, "its label tessel.dev/hub is 'another-hub': another hub's, not 'hub-1'");
}

TEST_F(ProberPeersConfigMapTest, AMemberRefusingTheWriteHoldsUpNoOther) {
  const auto a = TestCluster::member(0, hub_.namespace_name());
  const auto b = TestCluster::member(1, hub_.namespace_name());
  TESSEL_REQUIRE_TEST_SERVER(*a, "the authorizer");
  const std::string ns = hub_.namespace_name();
  for (const auto* m : {a.get(), b.get()}) {
    register_gpu_node(m->admin(), "gpu-1", 8);
    run_prober(m->admin(), ns, "prober", "gpu-1", "10.0.0.1", probe_port(7471));
  }
  // b's RBAC lets the operator read Nodes and Pods but not ConfigMaps.
  b->server()->set_authorizer([](const testing::RequestAttributes& r) {
    return r.resource != "configmaps" || r.user.name != "admin";
  });
  const std::string ma = add_member("a", a->self_contained_kubeconfig());
  const std::string mb = add_member("b", b->self_contained_kubeconfig());
  reconcile_until({{ma, {"True", ""}}, {mb, {"True", ""}}});
  json in_a;
  ASSERT_TRUE(lists({mb, ma}, a->admin(), ns, {{mb + "/gpu-1", "10.0.0.1", 7471}}, in_a)) << in_a;
  // b is still Reachable (its informers work) and is tried again sooner.
  EXPECT_EQ(reconciler_->reconcile(mb).requeue_after, std::chrono::milliseconds(5'000));
  EXPECT_EQ(reachable(live(mb)).value("status", ""), "True");
  b->server()->set_authorizer([](const testing::RequestAttributes&) { return true; });
  json in_b;
  EXPECT_TRUE(lists({mb}, b->admin(), ns, {{ma + "/gpu-1", "10.0.0.1", 7471}}, in_b)) << in_b;
}

}  // namespace
}  // namespace tessel::controller
