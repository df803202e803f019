// The cluster a test talks to: the in-process API test server, or, when the environment
// variable TESSEL_TEST_KUBECONFIG names a kubeconfig, that real cluster. Either way the test
// gets a client, a kubeconfig file (for kubectl) and a namespace of its own
// ("tessel-test-<random>"), deleted at the end. Tests that need what only the test server has
// (fault injection, the authorizer, direct store access) call require_test_server(), which
// skips visibly on a real cluster.
//
// Multi-cluster tests add member clusters with TestCluster::member(index, hub.namespace_name()):
// the index-th kubeconfig of TESSEL_TEST_MEMBER_KUBECONFIGS (comma-separated) when that is set,
// else a fresh API test server each. A member's namespace has the hub's name, because the
// operator puts a job's objects in the job's own namespace in every member.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/config.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {

inline constexpr const char* kTestKubeconfigVariable = "TESSEL_TEST_KUBECONFIG";
inline constexpr const char* kTestMemberKubeconfigsVariable = "TESSEL_TEST_MEMBER_KUBECONFIGS";

class TestCluster {
 public:
  // A real cluster when TESSEL_TEST_KUBECONFIG is set (the options are then unused), else a
  // fresh API test server started with `options`.
  explicit TestCluster(ApiTestServerOptions options = {});
  // The index-th member cluster (from 0): the index-th kubeconfig of
  // TESSEL_TEST_MEMBER_KUBECONFIGS when that is set (the options are then unused), else a fresh
  // API test server started with `options`. Its namespace is `namespace_name` (pass the hub's
  // namespace_name()); where that namespace exists already (the member is the hub's own real
  // cluster) it is used and left in place. Throws std::out_of_range when the variable names
  // fewer members: call TESSEL_REQUIRE_MEMBER_CLUSTERS(count) first, which skips visibly.
  static std::unique_ptr<TestCluster> member(int index, const std::string& namespace_name,
                                             ApiTestServerOptions options = {});
  // The kubeconfig paths TESSEL_TEST_MEMBER_KUBECONFIGS names, in order; empty when unset.
  static std::vector<std::string> real_member_kubeconfigs();

  ~TestCluster();  // deletes the namespace it created (without waiting: a real one takes time)
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  bool is_real() const { return server_ == nullptr; }
  // nullptr on a real cluster.
  ApiTestServer* server() const { return server_.get(); }

  const kube::ClusterConfig& config() const { return config_; }
  // A kubeconfig file for this cluster (TESSEL_TEST_KUBECONFIG itself on a real cluster):
  // tests pass it to kubectl with --namespace namespace_name().
  const std::string& kubeconfig_path() const { return kubeconfig_path_; }
  const std::string& namespace_name() const { return namespace_; }
  // A kubeconfig for this cluster that refers to no file (CA, token or client certificate
  // embedded as data), context namespace namespace_name(): what a MemberCluster's Secret holds.
  std::string self_contained_kubeconfig() const;

  // A new client with these options (rate limits off unless the options set them).
  std::shared_ptr<kube::Client> client(kube::ClientOptions options = unlimited()) const;
  // The client the constructor made, for set-up and clean-up.
  kube::Client& admin() const { return *admin_; }

  // Installs, or brings up to date with server-side apply, the cluster-scoped test CRD
  // "testjobs.tests.tessel.dev" of test_crd_file() (kind TestJob, namespaced, status
  // subresource, printer columns, the TrainingJob schema of the fixtures) and waits until it is
  // Established and served. Returns its resource. The CRD is shared by every test and every run,
  // and stays installed: deleting it would delete the TestJobs of tests running beside.
  kube::ResourceInfo ensure_test_crd() const;

  static kube::ClientOptions unlimited();

 private:
  // real_kubeconfig: a real cluster's kubeconfig, or "" for a fresh test server with `options`;
  // namespace_name: "" for a new random one.
  TestCluster(const std::string& real_kubeconfig, ApiTestServerOptions options,
              const std::string& namespace_name);

  std::unique_ptr<ApiTestServer> server_;
  kube::ClusterConfig config_;
  std::string directory_;  // temporary files (the test server's kubeconfig); "" when none
  std::string kubeconfig_path_;
  std::string namespace_;
  bool owns_namespace_ = true;  // false: it existed before (a member on the hub's cluster)
  std::shared_ptr<kube::Client> admin_;
};

// Skips the current test on a real cluster, naming what is missing there.
#define TESSEL_REQUIRE_TEST_SERVER(cluster, what)                                            \
  do {                                                                                       \
    if ((cluster).is_real())                                                                 \
      GTEST_SKIP() << "needs the API test server (" << (what) << "); "                       \
                   << ::tessel::testing::kTestKubeconfigVariable << " names a real cluster"; \
  } while (0)

// Skips the current test when TESSEL_TEST_MEMBER_KUBECONFIGS is set but names fewer than
// `count` member clusters (without the variable, members are test servers: any count works).
#define TESSEL_REQUIRE_MEMBER_CLUSTERS(count)                                                  \
  do {                                                                                         \
    const auto named = ::tessel::testing::TestCluster::real_member_kubeconfigs().size();       \
    if (named > 0 && named < static_cast<std::size_t>(count))                                  \
      GTEST_SKIP() << "needs " << (count) << " member clusters; "                              \
                   << ::tessel::testing::kTestMemberKubeconfigsVariable << " names " << named; \
  } while (0)

// The test CRD's manifest (YAML), for tests that install it themselves (with kubectl).
const std::string& test_crd_file();

// A TestJob manifest in `ns` with the given replicas (spec.model "gpt2-124m").
nlohmann::json test_job(const std::string& ns, const std::string& name, int replicas = 1);

}  // namespace tessel::testing
