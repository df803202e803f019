#include "tests/support/test_cluster.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "kube/api_error.h"
#include "kube/base64.h"
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

std::string real_hub_kubeconfig() {
  const char* path = std::getenv(kTestKubeconfigVariable);
  return path ? path : "";
}

}  // namespace

kube::ClientOptions TestCluster::unlimited() {
  kube::ClientOptions options;
  options.qps = 0;
  options.user_agent = "tessel-tests";
  return options;
}

TestCluster::TestCluster(ApiTestServerOptions options)
    : TestCluster(real_hub_kubeconfig(), std::move(options), "") {}

std::vector<std::string> TestCluster::real_member_kubeconfigs() {
  std::vector<std::string> paths;
  const char* value = std::getenv(kTestMemberKubeconfigsVariable);
  if (!value) return paths;
  std::stringstream list(value);
  for (std::string path; std::getline(list, path, ',');)
    if (!path.empty()) paths.push_back(path);
  return paths;
}

std::unique_ptr<TestCluster> TestCluster::member(int index, const std::string& namespace_name,
                                                 ApiTestServerOptions options) {
  if (namespace_name.empty())
    throw std::invalid_argument("TestCluster::member: give the hub's namespace name");
  const std::vector<std::string> real = real_member_kubeconfigs();
  if (real.empty())
    return std::unique_ptr<TestCluster>(new TestCluster("", options, namespace_name));
  if (index < 0 || static_cast<std::size_t>(index) >= real.size())
    throw std::out_of_range("member cluster " + std::to_string(index) + ": " +
                            kTestMemberKubeconfigsVariable + " names " +
                            std::to_string(real.size()) + " (use TESSEL_REQUIRE_MEMBER_CLUSTERS)");
  return std::unique_ptr<TestCluster>(new TestCluster(real[index], options, namespace_name));
}

TestCluster::TestCluster(const std::string& real_kubeconfig, ApiTestServerOptions options,
                         const std::string& namespace_name) {
  if (!real_kubeconfig.empty()) {
    kubeconfig_path_ = real_kubeconfig;
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
  namespace_ = namespace_name.empty() ? "tessel-test-" + random_suffix() : namespace_name;
  try {
    admin_->create(
        namespaces(), "",
        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", namespace_}}}});
  } catch (const kube::ApiError& error) {
    // A member on the hub's own cluster: the hub made it and deletes it.
    if (namespace_name.empty() || !error.is_already_exists()) throw;
    owns_namespace_ = false;
  }
}

TestCluster::~TestCluster() {
  if (owns_namespace_) {
    try {
      admin_->remove(namespaces(), "", namespace_);
    } catch (const std::exception& error) {
      ADD_FAILURE() << "deleting test namespace " << namespace_ << ": " << error.what();
    }
  }
  if (!directory_.empty()) std::filesystem::remove_all(directory_);
}

std::string TestCluster::self_contained_kubeconfig() const {
  nlohmann::json cluster = {{"server", config_.server}};
  if (!config_.ca_pem.empty())
    cluster["certificate-authority-data"] = kube::base64_encode(config_.ca_pem);
  if (config_.insecure_skip_tls_verify) cluster["insecure-skip-tls-verify"] = true;
  if (!config_.tls_server_name.empty()) cluster["tls-server-name"] = config_.tls_server_name;
  if (!config_.proxy_url.empty()) cluster["proxy-url"] = config_.proxy_url;
  nlohmann::json user = nlohmann::json::object();
  if (!config_.token.empty()) user["token"] = config_.token;  // a token file's content
  if (!config_.client_cert_pem.empty()) {
    user["client-certificate-data"] = kube::base64_encode(config_.client_cert_pem);
    user["client-key-data"] = kube::base64_encode(config_.client_key_pem);
  }
  // JSON is YAML: kubeconfig readers take it as it is.
  return nlohmann::json{
      {"apiVersion", "v1"},
      {"kind", "Config"},
      {"current-context", "test"},
      {"clusters", {{{"name", "test"}, {"cluster", cluster}}}},
      {"users", {{{"name", "test"}, {"user", user}}}},
      {"contexts",
       {{{"name", "test"},
         {"context", {{"cluster", "test"}, {"user", "test"}, {"namespace", namespace_}}}}}}}
      .dump(2);
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
