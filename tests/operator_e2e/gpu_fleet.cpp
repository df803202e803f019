#include "tests/operator_e2e/gpu_fleet.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <tuple>

namespace tessel::testing {
namespace {

std::string rfc3339_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

api::LinkMeasurement measurement(double rtt_ms, double gbps, const std::string& at) {
  // p90 a little above the median, small messages a little below bulk: as a prober measures.
  return {rtt_ms, rtt_ms * 1.2, gbps * 0.8, gbps, at};
}

// The kubelet's own log, in a file beside the pods' logs (its lines would drown the test's).
std::shared_ptr<const kube::Logger> file_logger(const std::string& path) {
  auto file = std::make_shared<std::ofstream>(path, std::ios::app);
  return std::make_shared<const kube::Logger>("process-kubelet", kube::LogLevel::kInfo,
                                              [file](std::string_view line) {
                                                *file << line << '\n' << std::flush;
                                              });
}

}  // namespace

GpuFleet::GpuFleet(std::vector<FleetMember> members, const std::string& run_id,
                   const std::string& work_dir, const FleetOptions& fleet_options)
    : members_(std::move(members)) {
  for (size_t m = 0; m < members_.size(); ++m)
    for (int k = 0; k < members_[m].nodes; ++k)
      nodes_.push_back({static_cast<int>(m), members_[m].cluster + "-gpu" + std::to_string(k)});

  const std::string at = rfc3339_now();
  for (const GpuNode& node : nodes_) {
    api::NodeLinks links;
    if (!fleet_options.write_links) {
      links_.push_back(std::move(links));
      continue;
    }
    for (const GpuNode& peer : nodes_) {
      if (peer.name == node.name) continue;
      if (peer.member == node.member)
        links.peers[peer.name] = measurement(kFastLinkRttMs, kFastLinkGbps, at);
      else
        links.peers[members_[peer.member].cluster + "/" + peer.name] =
            measurement(kSlowLinkRttMs, kSlowLinkGbps, at);
    }
    links_.push_back(std::move(links));
  }

  for (size_t m = 0; m < members_.size(); ++m) {
    const FleetMember& member = members_[m];
    ProcessKubeletOptions options;
    options.work_dir = work_dir + "/" + member.cluster;
    std::filesystem::create_directories(options.work_dir);
    options.logger = file_logger(options.work_dir + "/kubelet.log");
    options.image_entrypoints["tessel/stage"] = fleet_options.stage_binary;
    for (const auto& [image, binary] : fleet_options.more_images)
      options.image_entrypoints[image] = binary;
    options.restart_backoff_initial = std::chrono::milliseconds(500);
    options.restart_backoff_cap = std::chrono::milliseconds(2000);
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (nodes_[n].member != static_cast<int>(m)) continue;
      ProcessNodeOptions node;
      node.name = nodes_[n].name;
      node.gpus = member.gpus_per_node;
      node.cpu = "16";
      node.memory = "64Gi";
      node.labels = {{"nvidia.com/gpu.product", "NVIDIA-H200"},
                     {"topology.kubernetes.io/region", member.region},
                     {"topology.kubernetes.io/zone", member.region + "a"},
                     {kRunLabel, run_id}};
      if (fleet_options.write_links)
        node.annotations = {{api::kLinksAnnotation, api::format_node_links(links_[n])}};
      if (n < fleet_options.node_networks.size())
        std::tie(node.network_namespace, node.address) = fleet_options.node_networks[n];
      options.nodes.push_back(std::move(node));
    }
    kubelets_.push_back(std::make_unique<ProcessKubelet>(member.client, std::move(options)));
  }
}

GpuFleet::~GpuFleet() {
  stop();
  if (!started_) return;
  const kube::ResourceInfo nodes = *kube::ResourceRegistry().find_resource("", "nodes");
  for (const GpuNode& node : nodes_) {
    try {
      members_[node.member].client->remove(nodes, "", node.name);
    } catch (const std::exception&) {
      // Best effort: the test server goes away with the test; a real cluster is cleaned of
      // what can be deleted.
    }
  }
}

void GpuFleet::start() {
  started_ = true;
  for (auto& kubelet : kubelets_) kubelet->start();
}

void GpuFleet::stop() {
  for (auto& kubelet : kubelets_) kubelet->stop();
}

int GpuFleet::total_gpus() const {
  int total = 0;
  for (const GpuNode& node : nodes_) total += members_[node.member].gpus_per_node;
  return total;
}

const api::NodeLinks& GpuFleet::links_of(const std::string& node) const {
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (nodes_[n].name == node) return links_[n];
  throw std::invalid_argument("GpuFleet: no node named " + node);
}

}  // namespace tessel::testing
