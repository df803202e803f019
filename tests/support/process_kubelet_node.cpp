#include "tests/support/process_kubelet_node.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <thread>

#include "kube/api_error.h"
#include "kube/object.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

constexpr const char* kLeaseNamespace = "kube-node-lease";
constexpr const char* kKubeletVersion = "v1.26.4";
constexpr int kConflictAttempts = 5;

#if defined(__x86_64__)
constexpr const char* kArchitecture = "amd64";
#elif defined(__aarch64__)
constexpr const char* kArchitecture = "arm64";
#else
#error "the process kubelet knows no Kubernetes name for this architecture"
#endif

std::string machine_cpu() {
  const unsigned count = std::thread::hardware_concurrency();
  return std::to_string(count == 0 ? 1 : count);
}

std::string machine_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  return std::to_string(static_cast<long long>(pages) * page_size / 1024) + "Ki";
}

std::string kernel_version() {
  struct utsname name {};
  return ::uname(&name) == 0 ? name.release : "";
}

json node_condition(const std::string& type, const std::string& status, const std::string& reason,
                    const std::string& message, const std::string& now) {
  return {{"type", type},
          {"status", status},
          {"lastHeartbeatTime", now},
          {"lastTransitionTime", now},
          {"reason", reason},
          {"message", message}};
}

// Reads the node, lets `edit` change its taints, and writes them back conditionally on the
// resourceVersion read (again on a conflict). `edit` returns false when nothing changed.
void edit_taints(kube::Client& client, const std::string& node,
                 const std::function<bool(json& taints)>& edit) {
  const kube::ResourceInfo nodes = client.resource_for("v1", "Node");
  for (int attempt = 1;; ++attempt) {
    const json current = client.get(nodes, "", node);
    json taints = current.value("spec", json::object()).value("taints", json::array());
    if (!taints.is_array()) taints = json::array();
    if (!edit(taints)) return;
    const json patch = {{"metadata", {{"resourceVersion", kube::object_resource_version(current)}}},
                        {"spec", {{"taints", taints.empty() ? json(nullptr) : taints}}}};
    try {
      client.patch(nodes, "", node, kube::PatchType::kMerge, patch);
      return;
    } catch (const kube::ApiError& error) {
      if (!error.is_conflict() || attempt == kConflictAttempts) throw;
    }
  }
}

bool is_node_lifecycle_taint(const json& taint) {
  const std::string key = taint.value("key", "");
  return key == "node.kubernetes.io/not-ready" || key == "node.kubernetes.io/unreachable";
}

}  // namespace

json node_object(const ProcessNodeOptions& node) {
  json labels = {{"kubernetes.io/hostname", node.name},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", kArchitecture},
                 {"beta.kubernetes.io/os", "linux"},
                 {"beta.kubernetes.io/arch", kArchitecture}};
  for (const auto& [key, value] : node.labels) labels[key] = value;
  json metadata = {{"name", node.name}, {"labels", labels}};
  if (!node.annotations.empty()) metadata["annotations"] = node.annotations;
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", metadata}};
}

json node_status_patch(const ProcessNodeOptions& node, const std::string& address,
                       std::chrono::system_clock::time_point now) {
  json capacity = {{"cpu", node.cpu.empty() ? machine_cpu() : node.cpu},
                   {"memory", node.memory.empty() ? machine_memory() : node.memory},
                   {"pods", std::to_string(node.max_pods)}};
  if (node.gpus > 0) capacity["nvidia.com/gpu"] = std::to_string(node.gpus);
  const std::string time = kube::format_rfc3339(now);
  json conditions = json::array(
      {node_condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                      "kubelet has sufficient memory available", time),
       node_condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                      "kubelet has no disk pressure", time),
       node_condition("PIDPressure", "False", "KubeletHasSufficientPID",
                      "kubelet has sufficient PID available", time),
       node_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", time)});
  json status = {{"capacity", capacity},
                 {"allocatable", capacity},
                 {"conditions", conditions},
                 {"addresses", json::array({{{"type", "InternalIP"}, {"address", address}},
                                            {{"type", "Hostname"}, {"address", node.name}}})},
                 {"nodeInfo",
                  {{"machineID", ""},
                   {"systemUUID", ""},
                   {"bootID", ""},
                   {"kernelVersion", kernel_version()},
                   {"osImage", "tessel process kubelet"},
                   {"containerRuntimeVersion", "process://1.0.0"},
                   {"kubeletVersion", kKubeletVersion},
                   {"kubeProxyVersion", kKubeletVersion},
                   {"operatingSystem", "linux"},
                   {"architecture", kArchitecture}}}};
  return {{"status", status}};
}

std::string format_micro_time(std::chrono::system_clock::time_point time) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(micros / 1'000'000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[80];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<long long>(micros % 1'000'000));
  return text;
}

void register_node(kube::Client& client, const ProcessNodeOptions& node, const std::string& address,
                   std::chrono::seconds lease_duration) {
  const kube::ResourceInfo nodes = client.resource_for("v1", "Node");
  const json object = node_object(node);
  try {
    client.create(nodes, "", object);
  } catch (const kube::ApiError& error) {
    if (!error.is_already_exists()) throw;
    client.patch(nodes, "", node.name, kube::PatchType::kMerge,
                 {{"metadata",
                   {{"labels", object["metadata"]["labels"]},
                    {"annotations", object["metadata"].value("annotations", json::object())}}}});
  }
  client.patch(nodes, "", node.name, kube::PatchType::kStrategicMerge,
               node_status_patch(node, address, std::chrono::system_clock::now()), {}, "status");
  edit_taints(client, node.name, [](json& taints) {
    const std::size_t before = taints.size();
    taints.erase(std::remove_if(taints.begin(), taints.end(), is_node_lifecycle_taint),
                 taints.end());
    return taints.size() != before;
  });
  renew_node_lease(client, node.name, lease_duration);
}

void renew_node_lease(kube::Client& client, const std::string& node,
                      std::chrono::seconds lease_duration) {
  const kube::ResourceInfo leases = client.resource_for("coordination.k8s.io/v1", "Lease");
  const json spec = {{"holderIdentity", node},
                     {"leaseDurationSeconds", lease_duration.count()},
                     {"renewTime", format_micro_time(std::chrono::system_clock::now())}};
  try {
    client.patch(leases, kLeaseNamespace, node, kube::PatchType::kMerge, {{"spec", spec}});
    return;
  } catch (const kube::ApiError& error) {
    if (!error.is_not_found()) throw;
  }
  const json owner = client.get(client.resource_for("v1", "Node"), "", node);
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata",
                 {{"name", node},
                  {"namespace", kLeaseNamespace},
                  {"ownerReferences", json::array({{{"apiVersion", "v1"},
                                                    {"kind", "Node"},
                                                    {"name", node},
                                                    {"uid", kube::object_uid(owner)}}})}}},
                {"spec", spec}};
  try {
    client.create(leases, kLeaseNamespace, lease);
  } catch (const kube::ApiError& error) {
    if (!error.is_already_exists()) throw;
    client.patch(leases, kLeaseNamespace, node, kube::PatchType::kMerge, {{"spec", spec}});
  }
}

void mark_node_unreachable(kube::Client& client, const std::string& node) {
  const std::string now = kube::format_rfc3339(std::chrono::system_clock::now());
  json conditions = json::array();
  for (const char* type : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}) {
    conditions.push_back({{"type", type},
                          {"status", "Unknown"},
                          {"lastTransitionTime", now},
                          {"reason", "NodeStatusUnknown"},
                          {"message", "Kubelet stopped posting node status."}});
  }
  client.patch(client.resource_for("v1", "Node"), "", node, kube::PatchType::kStrategicMerge,
               {{"status", {{"conditions", conditions}}}}, {}, "status");
  edit_taints(client, node, [&](json& taints) {
    bool changed = false;
    for (const char* effect : {"NoSchedule", "NoExecute"}) {
      bool present = false;
      for (const json& taint : taints) {
        present = present || (taint.value("key", "") == "node.kubernetes.io/unreachable" &&
                              taint.value("effect", "") == effect);
      }
      if (present) continue;
      json taint = {{"key", "node.kubernetes.io/unreachable"}, {"effect", effect}};
      if (std::string(effect) == "NoExecute") taint["timeAdded"] = now;
      taints.push_back(taint);
      changed = true;
    }
    return changed;
  });
  const kube::ResourceInfo pods = client.resource_for("v1", "Pod");
  kube::ListOptions options;
  options.field_selector = "spec.nodeName=" + node;
  for (const json& pod : client.list_all(pods, "", options).items) {
    if (!kube::is_condition_true(pod, "Ready")) continue;
    try {
      client.patch(
          pods, kube::object_namespace(pod), kube::object_name(pod),
          kube::PatchType::kStrategicMerge,
          {{"status",
            {{"conditions",
              json::array(
                  {{{"type", "Ready"}, {"status", "False"}, {"lastTransitionTime", now}}})}}}},
          {}, "status");
    } catch (const kube::ApiError& error) {
      if (!error.is_not_found()) throw;  // deleted meanwhile
    }
  }
}

}  // namespace tessel::testing
