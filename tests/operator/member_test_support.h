// What the member registry's and the MemberCluster reconciler's tests share: MemberCluster and
// Secret objects, kubeconfigs good and bad for a member TestCluster, GPU nodes and pods
// registered in a member through its API, and a poll with a generous timeout.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "kube/base64.h"
#include "kube/client.h"
#include "operator/controller/labels.h"
#include "tests/support/process_kubelet_node.h"
#include "tests/support/test_cluster.h"

namespace tessel::controller::member_testing {

using nlohmann::json;

// Only a broken registry or reconciler runs out of it.
inline constexpr auto kPatience = std::chrono::seconds(60);

template <typename Condition>
bool eventually(Condition done, std::chrono::seconds patience = kPatience) {
  const auto until = std::chrono::steady_clock::now() + patience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

inline json member_cluster(const std::string& name, const std::string& secret,
                           const std::string& region = "", bool allow_insecure = false) {
  json spec = {{"kubeconfigSecretRef", {{"name", secret}, {"key", "kubeconfig"}}},
               {"allowInsecureTLS", allow_insecure}};
  if (!region.empty()) spec["region"] = region;
  return {{"apiVersion", "tessel.dev/v1alpha1"},
          {"kind", "MemberCluster"},
          {"metadata", {{"name", name}, {"generation", 1}}},
          {"spec", spec}};
}

inline json kubeconfig_secret(const std::string& ns, const std::string& name,
                              const std::string& kubeconfig) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"type", "Opaque"},
          {"data", {{"kubeconfig", kube::base64_encode(kubeconfig)}}}};
}

// The member's self-contained kubeconfig with its cluster or user entry changed.
inline std::string kubeconfig_with(const testing::TestCluster& member, const json& cluster_patch,
                                   const json& user_replacement = nullptr) {
  json config = json::parse(member.self_contained_kubeconfig());
  config["clusters"][0]["cluster"].merge_patch(cluster_patch);
  if (!user_replacement.is_null()) config["users"][0]["user"] = user_replacement;
  return config.dump();
}

// A loopback port that accepts TCP connections (the kernel completes them) and never answers:
// an API server that hangs. Closed with the object.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      throw std::runtime_error("cannot open a silent loopback port");
    port_ = ntohs(address.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Registers a Ready GPU node in the member (as a kubelet does), with optional annotations.
inline void register_gpu_node(kube::Client& member, const std::string& name, int gpus,
                              std::map<std::string, std::string> annotations = {}) {
  testing::ProcessNodeOptions node;
  node.name = name;
  node.gpus = gpus;
  node.cpu = "16";
  node.memory = "64Gi";
  node.annotations = std::move(annotations);
  testing::register_node(member, node, "127.0.0.1", std::chrono::seconds(40));
}

// A pod bound to `node` asking for `gpus`, with `labels`.
inline json gpu_pod(const std::string& ns, const std::string& name, const std::string& node,
                    int gpus, const json& labels = json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"spec",
           {{"nodeName", node},
            {"restartPolicy", "Never"},
            {"containers",
             {{{"name", "stage"},
               {"image", "tessel/stage:0.1.0"},
               {"resources",
                {{"requests", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                 {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}}};
}

inline json hub_labels(const std::string& hub_id) { return {{kHubLabel, hub_id}}; }

}  // namespace tessel::controller::member_testing
