#include "tests/support/test_cluster.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <thread>

#include "kube/api_error.h"
#include "tests/support/api_yaml.h"

namespace tessel::testing {
namespace {

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
  admin_->create(
      namespaces(), "",
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
  std::ifstream file(test_crd_file());
  if (!file) throw std::runtime_error("cannot read " + test_crd_file());
  const nlohmann::json crd = parse_yaml({std::istreambuf_iterator<char>(file), {}});
  const kube::ResourceInfo crds =
      *kube::ResourceRegistry().find_resource("apiextensions.k8s.io", "customresourcedefinitions");
  // Applied, not created: a CRD left by an older run gets this definition.
  kube::ApplyOptions apply;
  apply.field_manager = "tessel-tests";
  admin_->apply(crds, crd, apply);
  const std::string name = crd["metadata"]["name"];
  const bool established = wait_for(
      [&] {
        const nlohmann::json live = admin_->get(crds, "", name);
        for (const auto& condition :
             live.value("/status/conditions"_json_pointer, nlohmann::json::array()))
          if (condition.value("type", "") == "Established" &&
              condition.value("status", "") == "True")
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

const std::string& test_crd_file() {
  static const std::string path = TESSEL_TEST_CRD_FILE;
  return path;
}

nlohmann::json test_job(const std::string& ns, const std::string& name, int replicas) {
  return {{"apiVersion", "tests.tessel.dev/v1alpha1"},
          {"kind", "TestJob"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"model", "gpt2-124m"}, {"replicas", replicas}}}};
}

}  // namespace tessel::testing
