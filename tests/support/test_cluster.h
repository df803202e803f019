// The cluster a test talks to: the in-process API test server, or, when the environment
// variable TESSEL_TEST_KUBECONFIG names a kubeconfig, that real cluster. Either way the test
// gets a client, a kubeconfig file (for kubectl) and a namespace of its own
// ("tessel-test-<random>"), deleted at the end. Tests that need what only the test server has
// (fault injection, the authorizer, direct store access) call require_test_server(), which
// skips visibly on a real cluster.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kube/client.h"
#include "kube/config.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {

inline constexpr const char* kTestKubeconfigVariable = "TESSEL_TEST_KUBECONFIG";

class TestCluster {
 public:
  // A real cluster when TESSEL_TEST_KUBECONFIG is set (the options are then unused), else a
  // fresh API test server started with `options`.
  explicit TestCluster(ApiTestServerOptions options = {});
  ~TestCluster();  // deletes the namespace (without waiting: a real one takes its time)
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
  std::unique_ptr<ApiTestServer> server_;
  kube::ClusterConfig config_;
  std::string directory_;  // temporary files (the test server's kubeconfig); "" when none
  std::string kubeconfig_path_;
  std::string namespace_;
  std::shared_ptr<kube::Client> admin_;
};

// Skips the current test on a real cluster, naming what is missing there.
#define TESSEL_REQUIRE_TEST_SERVER(cluster, what)                                            \
  do {                                                                                       \
    if ((cluster).is_real())                                                                 \
      GTEST_SKIP() << "needs the API test server (" << (what) << "); "                       \
                   << ::tessel::testing::kTestKubeconfigVariable << " names a real cluster"; \
  } while (0)

// The test CRD's manifest (YAML), for tests that install it themselves (with kubectl).
const std::string& test_crd_file();

// A TestJob manifest in `ns` with the given replicas (spec.model "gpt2-124m").
nlohmann::json test_job(const std::string& ns, const std::string& name, int replicas = 1);

}  // namespace tessel::testing
