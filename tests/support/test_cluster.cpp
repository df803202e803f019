#include "tests/support/test_cluster.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>

#include "kube/api_error.h"

namespace tessel::testing {
namespace {

// The TrainingJob CRD of the captured fixtures, moved to a group of its own so that tests on a
// real cluster never touch a CRD that tessel itself (or anything else) installed.
const char* const kTestCrd = R"({
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "testjobs.tests.tessel.dev"},
  "spec": {
    "group": "tests.tessel.dev",
    "scope": "Namespaced",
    "names": {"plural": "testjobs", "singular": "testjob", "kind": "TestJob",
              "listKind": "TestJobList", "shortNames": ["ttj"]},
    "versions": [{
      "name": "v1alpha1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "additionalPrinterColumns": [
        {"name": "Model", "type": "string", "jsonPath": ".spec.model"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {
          "spec": {
            "type": "object", "required": ["model", "replicas"],
            "properties": {
              "model": {"type": "string"},
              "replicas": {"type": "integer", "format": "int32", "minimum": 1},
              "stages": {"type": "integer", "format": "int32", "minimum": 1, "default": 1},
              "schedule": {"type": "string", "enum": ["GPipe", "1F1B", "Interleaved1F1B"],
                           "default": "1F1B"}}},
          "status": {
            "type": "object",
            "properties": {
              "phase": {"type": "string",
                        "enum": ["Pending", "Placing", "Running", "Succeeded", "Failed"]},
              "observedGeneration": {"type": "integer", "format": "int64"},
              "conditions": {"type": "array", "items": {
                "type": "object", "required": ["type", "status"],
                "properties": {"type": {"type": "string"}, "status": {"type": "string"},
                               "reason": {"type": "string"}, "message": {"type": "string"},
                               "lastTransitionTime": {"type": "string", "format": "date-time"},
                               "observedGeneration": {"type": "integer"}}}}}}}}}
    }]
  }
})";

std::string random_suffix() {
  std::random_device device;
  std::mt19937_64 rng((static_cast<std::uint64_t>(device()) << 32) ^ device());
  const char* alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string suffix;
  for (int i = 0; i < 8; ++i) suffix += alphabet[rng() % 36];
  return suffix;
}

// Polls until `done` or the deadline; real clusters take a moment to establish a CRD.
template <typename Condition>
bool wait_for(Condition done, std::chrono::seconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

const kube::ResourceInfo& namespaces() {
  static const kube::ResourceInfo info = *kube::ResourceRegistry().find_resource("", "namespaces");
  return info;
}

}  // namespace

kube::ClientOptions TestCluster::unlimited() {
  kube::ClientOptions options;
  options.qps = 0;
  options.user_agent = "tessel-tests";
  return options;
}

TestCluster::TestCluster(ApiTestServerOptions options) {
  if (const char* path = std::getenv(kTestKubeconfigVariable); path && *path) {
    kubeconfig_path_ = path;
    config_ = kube::load_kubeconfig(kubeconfig_path_);
  } else {
    server_ = std::make_unique<ApiTestServer>(std::move(options));
    directory_ = (std::filesystem::temp_directory_path() /
                  ("tessel-test-cluster-" + std::to_string(::getpid()) + "-" + random_suffix()))
                     .string();
    std::filesystem::create_directories(directory_);
    kubeconfig_path_ = server_->write_kubeconfig(directory_ + "/kubeconfig");
    config_ = kube::load_kubeconfig(kubeconfig_path_);
  }
  admin_ = kube::Client::from_config(config_, unlimited());
  namespace_ = "tessel-test-" + random_suffix();
  admin_->create(namespaces(), "",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", namespace_}}}});
}

TestCluster::~TestCluster() {
  try {
    admin_->remove(namespaces(), "", namespace_);
  } catch (const std::exception& error) {
    ADD_FAILURE() << "deleting test namespace " << namespace_ << ": " << error.what();
  }
  if (!directory_.empty()) std::filesystem::remove_all(directory_);
}

std::shared_ptr<kube::Client> TestCluster::client(kube::ClientOptions options) const {
  return kube::Client::from_config(config_, std::move(options));
}

kube::ResourceInfo TestCluster::ensure_test_crd() const {
  const nlohmann::json crd = nlohmann::json::parse(kTestCrd);
  const kube::ResourceInfo crds =
      *kube::ResourceRegistry().find_resource("apiextensions.k8s.io", "customresourcedefinitions");
  try {
    admin_->create(crds, "", crd);
  } catch (const kube::ApiError& error) {
    if (!error.is_already_exists()) throw;
  }
  const std::string name = crd["metadata"]["name"];
  const bool established = wait_for(
      [&] {
        const nlohmann::json live = admin_->get(crds, "", name);
        for (const auto& condition : live.value("/status/conditions"_json_pointer, nlohmann::json::array()))
          if (condition.value("type", "") == "Established" && condition.value("status", "") == "True")
            return true;
        return false;
      },
      std::chrono::seconds(30));
  if (!established) throw std::runtime_error("CRD " + name + " was not Established within 30 s");
  const kube::ResourceInfo info = kube::parse_custom_resource_definition(crd).front();
  admin_->register_resource(info);
  // A real server may still answer 404 for a moment after Established.
  wait_for(
      [&] {
        try {
          admin_->list(info, namespace_);
          return true;
        } catch (const kube::ApiError&) {
          return false;
        }
      },
      std::chrono::seconds(10));
  return info;
}

nlohmann::json test_job(const std::string& ns, const std::string& name, int replicas) {
  return {{"apiVersion", "tests.tessel.dev/v1alpha1"},
          {"kind", "TestJob"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"model", "gpt2-124m"}, {"replicas", replicas}}}};
}

}  // namespace tessel::testing
