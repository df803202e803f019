// The member registry against member API servers: a good kubeconfig gives a synced member with
// its Nodes and Pods; a refused token, a wrong CA, a closed port or a server that never
// answers give Reachable False naming the cause and never block the caller; a new kubeconfig
// reconnects; a member that goes has its informers stopped.
#include "operator/controller/member_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>

#include "tests/operator/member_test_support.h"

namespace tessel::controller {
namespace {

using namespace member_testing;
using testing::TestCluster;

const kube::ResourceInfo& pods_resource() {
  static const kube::ResourceInfo info = *kube::ResourceRegistry().find_resource("", "pods");
  return info;
}

// What the registry's callbacks heard.
struct Heard {
  std::mutex mutex;
  std::map<std::string, std::set<std::string>> pods;  // cluster -> pod names
  std::map<std::string, int> node_changes;            // cluster -> calls

  std::set<std::string> pods_of(const std::string& cluster) {
    std::lock_guard lock(mutex);
    return pods[cluster];
  }
  int node_changes_of(const std::string& cluster) {
    std::lock_guard lock(mutex);
    return node_changes[cluster];
  }
};

class MemberRegistryTest : public ::testing::Test {
 protected:
  MemberRegistryTest() {
    MemberRegistry::Options options;
    options.operator_namespace = hub_namespace_;
    options.hub_id = "hub-1";
    options.client = TestCluster::unlimited();
    options.client.request_timeout = std::chrono::milliseconds(2000);
    options.client.backoff.steps = 1;
    options.logger = quiet_;
    registry_ = std::make_unique<MemberRegistry>(
        options,
        [this](const std::string& cluster, const json& pod) {
          std::lock_guard lock(heard_.mutex);
          heard_.pods[cluster].insert(pod["metadata"]["name"].get<std::string>());
        },
        [this](const std::string& cluster) {
          std::lock_guard lock(heard_.mutex);
          ++heard_.node_changes[cluster];
        });
  }

  // Updates `name` until its Reachable condition has `status` (and `reason`, when given).
  MemberConnection until_reachable(const std::string& name, const json& member, const json& secret,
                                   const std::string& status, const std::string& reason = "") {
    MemberConnection last;
    const bool reached = eventually([&] {
      last = registry_->update(name, &member, &secret);
      return last.reachable.status == status && (reason.empty() || last.reachable.reason == reason);
    });
    EXPECT_TRUE(reached) << name << " never became " << status << " " << reason << "; last "
                         << last.reachable.status << " " << last.reachable.reason << ": "
                         << last.reachable.message;
    return last;
  }

  std::shared_ptr<const kube::Logger> quiet_ =
      std::make_shared<const kube::Logger>("test", kube::LogLevel::kError, [](std::string_view) {});
  std::string hub_namespace_ = "tessel-system";
  Heard heard_;
  std::unique_ptr<MemberRegistry> registry_;
};

TEST_F(MemberRegistryTest, AGoodMemberSyncsItsNodesAndPods) {
  TESSEL_REQUIRE_MEMBER_CLUSTERS(2);
  TestCluster hub;
  const auto a = TestCluster::member(0, hub.namespace_name());
  const auto b = TestCluster::member(1, hub.namespace_name());
  TESSEL_REQUIRE_TEST_SERVER(*a, "exact node counts: a real member has nodes of its own");
  register_gpu_node(a->admin(), "gpu-a-1", 8);
  register_gpu_node(a->admin(), "gpu-a-2", 8);
  register_gpu_node(b->admin(), "gpu-b-1", 4);
  const std::string ns = hub.namespace_name();
  a->admin().create(pods_resource(), ns, gpu_pod(ns, "stage-0", "gpu-a-1", 1, hub_labels("hub-1")));
  a->admin().create(pods_resource(), ns, gpu_pod(ns, "someone-else", "gpu-a-2", 2));
  a->admin().create(pods_resource(), ns,
                    gpu_pod(ns, "other-hub", "gpu-a-2", 1, hub_labels("hub-2")));

  const json secret_a =
      kubeconfig_secret(hub_namespace_, "a-kubeconfig", a->self_contained_kubeconfig());
  const json secret_b =
      kubeconfig_secret(hub_namespace_, "b-kubeconfig", b->self_contained_kubeconfig());
  const json member_a = member_cluster("a", "a-kubeconfig", "eu-west");
  const json member_b = member_cluster("b", "b-kubeconfig", "us-east");
  const MemberConnection connected = until_reachable("a", member_a, secret_a, "True", "Connected");
  EXPECT_NE(connected.reachable.message.find(a->config().server), std::string::npos);
  until_reachable("b", member_b, secret_b, "True");

  const auto view = registry_->member("a");
  ASSERT_TRUE(view);
  EXPECT_TRUE(view->synced);
  EXPECT_EQ(view->region, "eu-west");
  std::set<std::string> nodes, pods;
  for (const json& n : view->nodes()) nodes.insert(n["metadata"]["name"]);
  for (const json& p : view->pods()) pods.insert(p["metadata"]["name"]);
  EXPECT_EQ(nodes, (std::set<std::string>{"gpu-a-1", "gpu-a-2"}));
  // This hub's pod and every pod holding a node's GPUs, each once.
  EXPECT_EQ(pods, (std::set<std::string>{"stage-0", "someone-else", "other-hub"}));
  EXPECT_EQ(registry_->members().size(), 2u);
  EXPECT_EQ(registry_->member("b")->nodes().size(), 1u);

  // on_pod hears this hub's pods only; on_nodes hears node changes.
  ASSERT_TRUE(eventually([&] { return heard_.pods_of("a").count("stage-0") == 1; }));
  EXPECT_EQ(heard_.pods_of("a"), std::set<std::string>{"stage-0"});
  EXPECT_GE(heard_.node_changes_of("a"), 2);

  // A pod that finishes frees its GPUs: on_nodes hears it, and it leaves the bound pods.
  const int before = heard_.node_changes_of("a");
  a->admin().patch(pods_resource(), ns, "someone-else", kube::PatchType::kMerge,
                   {{"status", {{"phase", "Succeeded"}}}}, {}, "status");
  ASSERT_TRUE(eventually([&] { return heard_.node_changes_of("a") > before; }));
  ASSERT_TRUE(eventually([&] { return registry_->member("a")->pods().size() == 2u; }));
}

TEST_F(MemberRegistryTest, AWrongTokenIsUnauthorizedUntilTheSecretIsFixed) {
  TestCluster hub;
  const auto a = TestCluster::member(0, hub.namespace_name());
  const json member = member_cluster("a", "a-kubeconfig");
  const json wrong =
      kubeconfig_secret(hub_namespace_, "a-kubeconfig",
                        kubeconfig_with(*a, json::object(), {{"token", "not-a-token"}}));
  const MemberConnection refused = until_reachable("a", member, wrong, "False", "Unauthorized");
  EXPECT_NE(refused.reachable.message.find("cannot list and watch"), std::string::npos)
      << refused.reachable.message;
  EXPECT_NE(refused.reachable.message.find(a->config().server), std::string::npos);
  EXPECT_NE(refused.reachable.message.find("401"), std::string::npos) << refused.reachable.message;
  ASSERT_TRUE(registry_->member("a"));
  EXPECT_FALSE(registry_->member("a")->synced);

  // The Secret is fixed: the member reconnects with the new kubeconfig.
  const json fixed =
      kubeconfig_secret(hub_namespace_, "a-kubeconfig", a->self_contained_kubeconfig());
  until_reachable("a", member, fixed, "True", "Connected");
  EXPECT_TRUE(registry_->member("a")->synced);
}

TEST_F(MemberRegistryTest, UnreachableMembersAreNamedAndNeverBlockTheOthers) {
  TestCluster hub;
  const auto good = TestCluster::member(0, hub.namespace_name());
  testing::ApiTestServer stranger;  // its CA signed nothing the member serves
  SilentServer silent;
  const json bad_ca = kubeconfig_secret(
      hub_namespace_, "bad-ca",
      kubeconfig_with(*good,
                      {{"certificate-authority-data", kube::base64_encode(stranger.ca_pem())}}));
  const json closed = kubeconfig_secret(
      hub_namespace_, "closed", kubeconfig_with(*good, {{"server", "https://127.0.0.1:1"}}));
  const json hangs = kubeconfig_secret(hub_namespace_, "hangs",
                                       kubeconfig_with(*good, {{"server", silent.url()}}));

  const MemberConnection ca =
      until_reachable("bad-ca", member_cluster("bad-ca", "bad-ca"), bad_ca, "False", "Unreachable");
  EXPECT_NE(ca.reachable.message.find("certificate"), std::string::npos) << ca.reachable.message;
  const MemberConnection refused =
      until_reachable("closed", member_cluster("closed", "closed"), closed, "False", "Unreachable");
  EXPECT_NE(refused.reachable.message.find("https://127.0.0.1:1"), std::string::npos)
      << refused.reachable.message;
  const json hanging_member = member_cluster("hangs", "hangs");
  const MemberConnection first = registry_->update("hangs", &hanging_member, &hangs);
  EXPECT_EQ(first.reachable.status, "Unknown");
  EXPECT_EQ(first.reachable.reason, "Connecting");

  // While those fail or hang, a good member connects, and the hanging one is replaced by a
  // good kubeconfig without waiting for its list in flight.
  const json good_secret =
      kubeconfig_secret(hub_namespace_, "good", good->self_contained_kubeconfig());
  until_reachable("good", member_cluster("good", "good"), good_secret, "True");
  until_reachable("hangs", hanging_member, good_secret, "True");
  // The silent server's list times out (the client's 2 s): then it is named as such.
  const MemberConnection timed_out =
      until_reachable("silent", member_cluster("silent", "hangs"), hangs, "False", "Timeout");
  EXPECT_NE(timed_out.reachable.message.find(silent.url()), std::string::npos)
      << timed_out.reachable.message;
  registry_->stop();
  EXPECT_EQ(registry_->stopping(), 0u);
  EXPECT_TRUE(registry_->members().empty());
}

TEST_F(MemberRegistryTest, AForbiddenMemberNamesTheMissingPermission) {
  TestCluster hub;
  const auto a = TestCluster::member(0, hub.namespace_name());
  TESSEL_REQUIRE_TEST_SERVER(*a, "the authorizer");
  a->server()->add_token("reader-token", {"pod-reader", {}});
  a->server()->set_authorizer([](const testing::RequestAttributes& request) {
    if (request.user.name == "admin") return true;
    return request.user.name == "pod-reader" && request.resource == "pods";
  });
  const json secret = kubeconfig_secret(
      hub_namespace_, "a", kubeconfig_with(*a, json::object(), {{"token", "reader-token"}}));
  const MemberConnection forbidden =
      until_reachable("a", member_cluster("a", "a"), secret, "False", "Forbidden");
  EXPECT_NE(forbidden.reachable.message.find("nodes"), std::string::npos)
      << forbidden.reachable.message;
}

TEST_F(MemberRegistryTest, AMemberThatGoesHasItsInformersStopped) {
  TESSEL_REQUIRE_MEMBER_CLUSTERS(2);
  TestCluster hub;
  const auto a = TestCluster::member(0, hub.namespace_name());
  const auto b = TestCluster::member(1, hub.namespace_name());
  TESSEL_REQUIRE_TEST_SERVER(*a, "registering nodes");
  const json secret_a = kubeconfig_secret(hub_namespace_, "a", a->self_contained_kubeconfig());
  const json secret_b = kubeconfig_secret(hub_namespace_, "b", b->self_contained_kubeconfig());
  until_reachable("a", member_cluster("a", "a"), secret_a, "True");
  until_reachable("b", member_cluster("b", "b"), secret_b, "True");

  const MemberConnection gone = registry_->update("a", nullptr, nullptr);
  EXPECT_FALSE(gone.config);
  EXPECT_FALSE(registry_->member("a"));
  ASSERT_EQ(registry_->members().size(), 1u);
  ASSERT_TRUE(eventually([&] { return registry_->stopping() == 0; }));

  // A node registered in each: only b's informers are there to hear it.
  const int a_before = heard_.node_changes_of("a");
  register_gpu_node(a->admin(), "gpu-a-late", 8);
  register_gpu_node(b->admin(), "gpu-b-late", 8);
  ASSERT_TRUE(eventually([&] {
    for (const json& n : registry_->member("b")->nodes())
      if (n["metadata"]["name"] == "gpu-b-late") return true;
    return false;
  }));
  EXPECT_EQ(heard_.node_changes_of("a"), a_before);
}

TEST(MemberRegistryOptions, TheHubIdMustBeALabelValue) {
  MemberRegistry::Options options;
  options.hub_id = "not a label value!";
  try {
    MemberRegistry registry(options, {}, {});
    FAIL() << "accepted hub id " << options.hub_id;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("'not a label value!' is not a label value"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace tessel::controller
