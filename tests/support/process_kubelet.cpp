#include "tests/support/process_kubelet.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <utility>

#include "kube/object.h"
#include "kube/stoppable_sleep.h"
#include "tests/support/process_kubelet_process.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

constexpr const char* kGpuResource = "nvidia.com/gpu";

// The pod's effective request: the larger of its app containers' sum and its largest init
// container (init containers run one at a time, before the others).
std::int64_t pod_gpu_request(const json& pod) {
  const json spec = pod.value("spec", json::object());
  std::int64_t app = 0;
  std::int64_t init = 0;
  for (const json& container : spec.value("containers", json::array()))
    app += container_gpu_request(container);
  for (const json& container : spec.value("initContainers", json::array())) {
    init = std::max(init, container_gpu_request(container));
  }
  return std::max(app, init);
}

std::string make_work_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tessel-process-kubelet-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("process kubelet: cannot create a work directory from " + pattern);
  }
  return pattern;
}

void validate(const ProcessKubeletOptions& options) {
  if (options.nodes.empty()) throw std::invalid_argument("process kubelet: no node to run");
  std::set<std::string> names;
  for (const ProcessNodeOptions& node : options.nodes) {
    if (node.name.empty()) throw std::invalid_argument("process kubelet: a node has no name");
    if (!names.insert(node.name).second) {
      throw std::invalid_argument("process kubelet: node " + node.name + " is given twice");
    }
    if (node.gpus < 0) {
      throw std::invalid_argument("process kubelet: node " + node.name + ": gpus " +
                                  std::to_string(node.gpus) + " is negative");
    }
    if (!node.network_namespace.empty()) {
      const std::string path = network_namespace_path(node.network_namespace);
      if (node.network_namespace.find('/') != std::string::npos || node.network_namespace == "." ||
          node.network_namespace == ".." || !std::filesystem::exists(path)) {
        throw std::invalid_argument("process kubelet: node " + node.name +
                                    ": network_namespace \"" + node.network_namespace +
                                    "\" is not a network namespace (no " + path + ")");
      }
      if (node.address.empty()) {
        throw std::invalid_argument("process kubelet: node " + node.name + ": network_namespace " +
                                    node.network_namespace +
                                    " needs the node's address in it (address)");
      }
    }
    in_addr parsed{};
    if (!node.address.empty() && ::inet_pton(AF_INET, node.address.c_str(), &parsed) != 1) {
      throw std::invalid_argument("process kubelet: node " + node.name + ": address \"" +
                                  node.address + "\" is not an IPv4 address");
    }
    if (!node.gpu_devices.empty() &&
        node.gpu_devices.size() != static_cast<std::size_t>(node.gpus)) {
      throw std::invalid_argument("process kubelet: node " + node.name + ": " +
                                  std::to_string(node.gpu_devices.size()) +
                                  " gpu_devices for gpus " + std::to_string(node.gpus));
    }
  }
  const auto positive = [](auto duration, const char* name) {
    if (duration.count() <= 0) {
      throw std::invalid_argument(std::string("process kubelet: ") + name + " must be positive");
    }
  };
  positive(options.lease_renew_interval, "lease_renew_interval");
  positive(options.lease_duration, "lease_duration");
  positive(options.restart_backoff_initial, "restart_backoff_initial");
  positive(options.restart_backoff_cap, "restart_backoff_cap");
  positive(options.retry_interval, "retry_interval");
}

// The options are valid and there is a client (checked before anything is created).
std::shared_ptr<kube::Client> checked(const ProcessKubeletOptions& options,
                                      std::shared_ptr<kube::Client> client) {
  validate(options);
  if (!client) throw std::invalid_argument("process kubelet: no client");
  return client;
}

}  // namespace

struct ProcessKubelet::Node {
  ProcessNodeOptions options;
  std::vector<std::string> devices;  // GPU device IDs

  std::mutex mutex;  // guards what follows
  bool halted = false;
  std::unique_ptr<kube::SharedInformer> informer;
  std::map<std::string, std::unique_ptr<PodWorker>> workers;  // by pod key
  std::vector<std::unique_ptr<PodWorker>> retired;  // removed or replaced, until their end
  std::map<std::string, std::vector<std::string>> gpus_by_uid;
};

ProcessKubelet::ProcessKubelet(std::shared_ptr<kube::Client> client, ProcessKubeletOptions options)
    : client_(checked(options, std::move(client))),
      options_(std::move(options)),
      logger_(options_.logger ? options_.logger
                              : std::make_shared<const kube::Logger>("process-kubelet")),
      work_dir_(options_.work_dir.empty() ? make_work_dir() : options_.work_dir) {
  std::filesystem::create_directories(work_dir_);
  for (const std::string& name : options_.inherited_environment) {
    if (const char* value = std::getenv(name.c_str())) base_environment_.emplace_back(name, value);
  }
  for (const ProcessNodeOptions& node_options : options_.nodes) {
    auto node = std::make_unique<Node>();
    node->options = node_options;
    node->devices = node_options.gpu_devices;
    if (node->devices.empty()) {
      for (int i = 0; i < node_options.gpus; ++i) node->devices.push_back(std::to_string(i));
    }
    nodes_.push_back(std::move(node));
  }
}

ProcessKubelet::~ProcessKubelet() { stop(); }

std::string ProcessKubelet::pod_directory(const std::string& namespace_,
                                          const std::string& name) const {
  return work_dir_ + "/" + namespace_ + "_" + name;
}

const std::string& ProcessKubelet::address_of(const Node& node) const {
  return node.options.address.empty() ? options_.address : node.options.address;
}

std::string ProcessKubelet::node_root(const std::string& name) const {
  return (options_.node_roots_dir.empty() ? work_dir_ + "/nodes" : options_.node_roots_dir) + "/" +
         name;
}

ProcessKubelet::Node& ProcessKubelet::node_named(const std::string& name) {
  for (const auto& node : nodes_) {
    if (node->options.name == name) return *node;
  }
  throw std::invalid_argument("process kubelet: no node named " + name);
}

void ProcessKubelet::register_nodes() {
  for (const auto& node : nodes_) {
    register_node(*client_, node->options, address_of(*node), options_.lease_duration);
    logger_->info("node registered", {{"node", node->options.name}});
  }
}

void ProcessKubelet::start() {
  std::lock_guard lifecycle(lifecycle_mutex_);
  if (started_) throw std::logic_error("process kubelet: started twice");
  if (stop_.stop_requested()) throw std::logic_error("process kubelet: started after stop()");
  started_ = true;
  register_nodes();
  const kube::ResourceInfo pods = client_->resource_for("v1", "Pod");
  for (const auto& node_pointer : nodes_) {
    Node& node = *node_pointer;
    kube::InformerOptions informer_options;
    informer_options.reflector.selectors.field_selector = "spec.nodeName=" + node.options.name;
    informer_options.reflector.logger = logger_;
    auto informer = std::make_unique<kube::SharedInformer>(*client_, pods, "", informer_options);
    informer->add_event_handler(
        {.on_add = [this, &node](const json& pod) { handle(node, pod, false); },
         .on_update = [this, &node](const json&, const json& pod) { handle(node, pod, false); },
         .on_delete = [this, &node](const json& pod, bool) { handle(node, pod, true); }});
    std::lock_guard lock(node.mutex);
    node.informer = std::move(informer);
    node.informer->start();
  }
  heartbeat_ = std::jthread([this](std::stop_token stop) { renew_leases(stop); });
  for (const auto& node : nodes_) {
    kube::SharedInformer* informer;
    {
      std::lock_guard lock(node->mutex);
      informer = node->informer.get();
    }
    if (informer) informer->wait_for_sync(stop_.get_token());
  }
}

PodWorkerSettings ProcessKubelet::worker_settings(const Node& node) const {
  PodWorkerSettings settings;
  settings.client = client_.get();
  settings.address = address_of(node);
  settings.network_namespace = node.options.network_namespace;
  settings.node_root = node_root(node.options.name);
  settings.image_entrypoints = options_.image_entrypoints;
  settings.base_environment = base_environment_;
  settings.restart_backoff_initial = options_.restart_backoff_initial;
  settings.restart_backoff_cap = options_.restart_backoff_cap;
  settings.retry_interval = options_.retry_interval;
  settings.logger = logger_;
  return settings;
}

void ProcessKubelet::handle(Node& node, const json& pod, bool deleted) {
  // The informer's thread calls this: a failure is logged, never thrown into it.
  try {
    if (deleted) {
      forget(node, pod);
    } else {
      dispatch(node, pod);
    }
  } catch (const std::exception& error) {
    logger_->error("cannot handle a pod",
                   {{"pod", kube::object_key(pod)}, {"error", error.what()}});
  }
}

void ProcessKubelet::dispatch(Node& node, const json& pod) {
  std::vector<std::unique_ptr<PodWorker>> ended;  // destroyed after the lock is released
  std::lock_guard lock(node.mutex);
  if (node.halted) return;
  for (auto& worker : node.retired) {
    if (worker->finished()) ended.push_back(std::move(worker));
  }
  std::erase(node.retired, nullptr);
  const std::string key = kube::object_key(pod);
  const std::string uid = kube::object_uid(pod);
  if (const auto it = node.workers.find(key); it != node.workers.end()) {
    if (it->second->uid() == uid) {
      it->second->update(pod);
      return;
    }
    it->second->removed();  // a new pod of the same name: the old one is gone
    node.gpus_by_uid.erase(it->second->uid());
    node.retired.push_back(std::move(it->second));
    node.workers.erase(it);
  }
  const std::string phase = pod.value("status", json::object()).value("phase", "");
  if (phase == "Succeeded" || phase == "Failed") return;
  PodAdmission admission = admit(node, pod);
  node.workers[key] = std::make_unique<PodWorker>(
      worker_settings(node), pod,
      pod_directory(kube::object_namespace(pod), kube::object_name(pod)), std::move(admission),
      [this, &node, uid] { release_gpus(node, uid); });
}

void ProcessKubelet::forget(Node& node, const json& pod) {
  std::lock_guard lock(node.mutex);
  const auto it = node.workers.find(kube::object_key(pod));
  if (it == node.workers.end() || it->second->uid() != kube::object_uid(pod)) return;
  it->second->removed();
  // Gone from the API, the pod is no longer active: the kubelet's device manager frees its
  // GPUs at once, even while its processes are still being killed.
  node.gpus_by_uid.erase(it->second->uid());
  node.retired.push_back(std::move(it->second));
  node.workers.erase(it);
}

PodAdmission ProcessKubelet::admit(Node& node, const json& pod) {
  PodAdmission admission;
  std::int64_t requested = 0;
  try {
    requested = pod_gpu_request(pod);
  } catch (const std::invalid_argument& error) {
    admission.admitted = false;
    admission.reason = "UnexpectedAdmissionError";
    admission.message = std::string("Pod was rejected: ") + error.what();
    logger_->warning("pod rejected",
                     {{"pod", kube::object_key(pod)}, {"reason", admission.message}});
    return admission;
  }
  if (requested == 0) return admission;
  std::set<std::string> used;
  for (const auto& [uid, devices] : node.gpus_by_uid) used.insert(devices.begin(), devices.end());
  const std::int64_t capacity = static_cast<std::int64_t>(node.devices.size());
  if (requested > capacity - static_cast<std::int64_t>(used.size())) {
    admission.admitted = false;
    admission.reason = std::string("OutOf") + kGpuResource;
    admission.message = std::string("Pod was rejected: Node didn't have enough resource: ") +
                        kGpuResource + ", requested: " + std::to_string(requested) +
                        ", used: " + std::to_string(used.size()) +
                        ", capacity: " + std::to_string(capacity);
    logger_->warning("pod rejected",
                     {{"pod", kube::object_key(pod)}, {"reason", admission.message}});
    return admission;
  }
  for (const std::string& device : node.devices) {
    if (static_cast<std::int64_t>(admission.gpu_devices.size()) == requested) break;
    if (!used.contains(device)) admission.gpu_devices.push_back(device);
  }
  node.gpus_by_uid[kube::object_uid(pod)] = admission.gpu_devices;
  return admission;
}

void ProcessKubelet::release_gpus(Node& node, const std::string& uid) {
  std::lock_guard lock(node.mutex);
  node.gpus_by_uid.erase(uid);
}

bool ProcessKubelet::halt(Node& node, bool failed) {
  std::unique_ptr<kube::SharedInformer> informer;
  std::vector<std::unique_ptr<PodWorker>> workers;
  {
    std::lock_guard lock(node.mutex);
    if (node.halted) return false;
    node.halted = true;
    informer = std::move(node.informer);
    for (auto& [key, worker] : node.workers) workers.push_back(std::move(worker));
    for (auto& worker : node.retired) workers.push_back(std::move(worker));
    node.workers.clear();
    node.retired.clear();
  }
  // Without the lock: a handler in flight waits for it, and a worker's thread may need it to
  // release its GPUs before it can end.
  if (informer) informer->stop();
  for (auto& worker : workers) worker->shutdown();
  workers.clear();  // joins the workers, whose processes are killed and reaped
  logger_->info(failed ? "node failed: its processes were killed" : "node stopped",
                {{"node", node.options.name}});
  return true;
}

void ProcessKubelet::fail_node(const std::string& name) {
  std::lock_guard lifecycle(lifecycle_mutex_);
  Node& node = node_named(name);
  if (!halt(node, true)) return;
  mark_node_unreachable(*client_, name);
}

void ProcessKubelet::stop() {
  stop_.request_stop();  // first: start() may be waiting for an informer's first list
  std::lock_guard lifecycle(lifecycle_mutex_);
  if (heartbeat_.joinable()) {
    heartbeat_.request_stop();
    heartbeat_.join();
  }
  for (const auto& node : nodes_) halt(*node, false);
}

void ProcessKubelet::renew_leases(std::stop_token stop) {
  while (kube::sleep_unless_stopped(kube::Clock::real(), options_.lease_renew_interval, stop)) {
    for (const auto& node : nodes_) {
      {
        std::lock_guard lock(node->mutex);
        if (node->halted) continue;
      }
      try {
        renew_node_lease(*client_, node->options.name, options_.lease_duration);
      } catch (const std::exception& error) {
        logger_->warning("cannot renew the node lease",
                         {{"node", node->options.name}, {"error", error.what()}});
      }
    }
  }
}

}  // namespace tessel::testing
