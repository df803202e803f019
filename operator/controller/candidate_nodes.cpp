#include "operator/controller/candidate_nodes.h"

#include <algorithm>
#include <charconv>

namespace tessel::controller {
namespace {

using nlohmann::json;

// A whole-number quantity ("8", 8); -1 when it is anything else.
int64_t whole_quantity(const json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (!value.is_string()) return -1;
  const std::string& text = value.get_ref<const std::string&>();
  int64_t n = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  return error == std::errc() && end == text.data() + text.size() && n >= 0 ? n : -1;
}

int64_t container_gpus(const json& container) {
  const json resources = container.value("resources", json::object());
  for (const char* kind : {"requests", "limits"}) {
    const json quantities = resources.value(kind, json::object());
    if (quantities.is_object() && quantities.contains(kGpuResource)) {
      return std::max<int64_t>(0, whole_quantity(quantities[kGpuResource]));
    }
  }
  return 0;
}

std::map<std::string, std::string> string_map(const json& object) {
  std::map<std::string, std::string> out;
  if (!object.is_object()) return out;
  for (const auto& [key, value] : object.items()) {
    if (value.is_string()) out[key] = value.get<std::string>();
  }
  return out;
}

}  // namespace

int Candidates::free_gpus() const {
  int total = 0;
  for (const GpuNode& n : nodes) total += n.free_gpus;
  return total;
}

int pod_gpu_request(const json& pod) {
  const json spec = pod.value("spec", json::object());
  int64_t sum = 0, init = 0;
  for (const json& c : spec.value("containers", json::array())) sum += container_gpus(c);
  for (const json& c : spec.value("initContainers", json::array()))
    init = std::max(init, container_gpus(c));
  return static_cast<int>(std::min<int64_t>(std::max(sum, init), 1 << 20));
}

bool node_ready(const json& node) {
  for (const json& c : node.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

int node_gpu_allocatable(const json& node) {
  const json allocatable =
      node.value("status", json::object()).value("allocatable", json::object());
  const int64_t gpus = allocatable.is_object() && allocatable.contains(kGpuResource)
                           ? whole_quantity(allocatable[kGpuResource])
                           : 0;
  return static_cast<int>(std::clamp<int64_t>(gpus, 0, 1 << 20));
}

Candidates candidate_nodes(const std::string& cluster, const std::string& cluster_region,
                           const std::vector<json>& nodes, const std::vector<json>& pods,
                           const api::LabelSelector& gpu_selector,
                           const std::string& ignore_owner_job) {
  std::map<std::string, int64_t> held;
  for (const json& pod : pods) {
    const json spec = pod.value("spec", json::object());
    const std::string node = spec.value("nodeName", "");
    const std::string phase = pod.value("status", json::object()).value("phase", "");
    if (node.empty() || phase == "Succeeded" || phase == "Failed") continue;
    const json labels = pod.value("metadata", json::object()).value("labels", json::object());
    if (!ignore_owner_job.empty() && labels.value(kJobUidLabel, "") == ignore_owner_job) continue;
    held[node] += pod_gpu_request(pod);
  }
  Candidates out;
  for (const json& node : nodes) {
    const json metadata = node.value("metadata", json::object());
    const std::string name = metadata.value("name", "");
    const auto exclude = [&](const std::string& reason) {
      out.excluded.push_back({cluster, name, reason});
    };
    const std::map<std::string, std::string> labels = string_map(metadata.value("labels", json()));
    const int64_t gpus = node_gpu_allocatable(node);
    if (gpus <= 0) continue;  // not a GPU node: not worth a line
    if (!node_ready(node)) {
      exclude("not Ready");
    } else if (node.value("spec", json::object()).value("unschedulable", false)) {
      exclude("cordoned");
    } else if (!gpu_selector.matches(labels)) {
      exclude("does not match spec.placement.gpuSelector");
    } else if (held[name] >= gpus) {
      exclude("no free " + std::string(kGpuResource) + " (" + std::to_string(held[name]) +
              " held of " + std::to_string(gpus) + ")");
    } else {
      GpuNode n;
      n.cluster = cluster;
      n.name = name;
      const auto label = [&](const char* key, const std::string& fallback) {
        const auto it = labels.find(key);
        return it != labels.end() ? it->second : fallback;
      };
      n.region = label(kRegionLabel, cluster_region);
      n.zone = label(kZoneLabel, "");
      n.gpu_product = label(kGpuProductLabel, "");
      n.free_gpus = static_cast<int>(gpus - held[name]);
      n.annotations = string_map(metadata.value("annotations", json()));
      out.nodes.push_back(std::move(n));
    }
  }
  std::sort(out.nodes.begin(), out.nodes.end(),
            [](const GpuNode& a, const GpuNode& b) { return a.name < b.name; });
  return out;
}

}  // namespace tessel::controller
