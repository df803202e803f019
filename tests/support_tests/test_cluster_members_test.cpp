// TestCluster's member clusters: a fresh API test server per member with the hub's namespace,
// or the kubeconfigs TESSEL_TEST_MEMBER_KUBECONFIGS names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "kube/resource.h"
#include "tests/support/test_cluster.h"

namespace tessel::testing {
namespace {

const kube::ResourceInfo& namespaces() {
  static const kube::ResourceInfo info = *kube::ResourceRegistry().find_resource("", "namespaces");
  return info;
}

// Sets an environment variable for one scope and puts back what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(TestClusterMembers, MembersHaveTheHubsNamespace) {
  TESSEL_REQUIRE_MEMBER_CLUSTERS(2);
  TestCluster hub;
  const auto a = TestCluster::member(0, hub.namespace_name());
  const auto b = TestCluster::member(1, hub.namespace_name());
  for (const TestCluster* member : {a.get(), b.get()}) {
    EXPECT_EQ(member->namespace_name(), hub.namespace_name());
    EXPECT_EQ(member->admin().get(namespaces(), "", hub.namespace_name())["metadata"]["name"],
              hub.namespace_name());
  }
  if (!a->is_real()) {
    EXPECT_NE(a->config().server, b->config().server);
    EXPECT_NE(a->config().server, hub.config().server);
  }
}

TEST(TestClusterMembers, TheVariableNamesTheMembers) {
  TestCluster hub;
  TESSEL_REQUIRE_TEST_SERVER(hub, "a member kubeconfig of its own to point the variable at");
  ScopedVariable members(kTestMemberKubeconfigsVariable, hub.kubeconfig_path() + ",");
  EXPECT_EQ(TestCluster::real_member_kubeconfigs(),
            std::vector<std::string>{hub.kubeconfig_path()});
  {
    // The hub's own cluster as member 0: the namespace exists, is used, and stays.
    const auto member = TestCluster::member(0, hub.namespace_name());
    EXPECT_TRUE(member->is_real());
    EXPECT_EQ(member->config().server, hub.config().server);
  }
  EXPECT_EQ(hub.admin().get(namespaces(), "", hub.namespace_name())["metadata"]["name"],
            hub.namespace_name());
  try {
    TestCluster::member(1, hub.namespace_name());
    FAIL() << "a second member was made from a variable naming one";
  } catch (const std::out_of_range& error) {
    EXPECT_NE(std::string(error.what()).find("TESSEL_TEST_MEMBER_KUBECONFIGS names 1"),
              std::string::npos)
        << error.what();
  }
}

TEST(TestClusterMembers, ASelfContainedKubeconfigReachesTheCluster) {
  TestCluster cluster;
  const kube::ClusterConfig config =
      kube::kubeconfig_from_bytes(cluster.self_contained_kubeconfig(), "test", {});
  EXPECT_EQ(config.server, cluster.config().server);
  EXPECT_EQ(config.default_namespace, cluster.namespace_name());
  const auto client = kube::Client::from_config(config, TestCluster::unlimited());
  EXPECT_EQ(client->get(namespaces(), "", cluster.namespace_name())["metadata"]["name"],
            cluster.namespace_name());
}

}  // namespace
}  // namespace tessel::testing
