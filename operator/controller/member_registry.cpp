#include "operator/controller/member_registry.h"

#include <regex>
#include <set>
#include <stdexcept>
#include <utility>

#include "kube/api_error.h"
#include "kube/clock.h"
#include "kube/http_transport.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "operator/controller/labels.h"

namespace tessel::controller {

using nlohmann::json;

constexpr char kJobUidIndex[] = "job-uid";
// The prober pods among the bound pods: all under one value, and by node.
constexpr char kProberIndex[] = "prober";
constexpr char kProberNodeIndex[] = "prober-node";

struct MemberInformers {
  kube::ClusterConfig config;
  kube::Clock::time_point started = kube::Clock::real().now();
  std::shared_ptr<kube::Client> client;  // declared before the informers: outlives them
  std::unique_ptr<kube::SharedInformer> nodes;
  std::unique_ptr<kube::SharedInformer> hub_pods;    // this hub's pods, every phase
  std::unique_ptr<kube::SharedInformer> bound_pods;  // every pod on a node, not finished

  // What each informer watches, for messages.
  std::vector<std::pair<const char*, const kube::SharedInformer*>> all() const {
    return {{"Nodes", nodes.get()},
            {"this hub's Pods", hub_pods.get()},
            {"Pods bound to nodes", bound_pods.get()}};
  }
  void stop() {
    for (kube::SharedInformer* informer : {nodes.get(), hub_pods.get(), bound_pods.get()})
      informer->stop();
  }
};

namespace {

// Pods that hold a node's resources: bound and not finished (what kubectl describe node and
// the scheduler's informer select).
constexpr const char* kBoundPodsSelector =
    "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

const kube::ResourceInfo& resource(const char* plural) {
  static const kube::ResourceRegistry registry;
  return *registry.find_resource("", plural);
}

bool is_label_value(const std::string& value) {
  static const std::regex pattern("^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$");
  return value.size() <= 63 && std::regex_match(value, pattern);
}

bool is_condition_reason(const std::string& reason) {
  static const std::regex pattern("^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$");
  return std::regex_match(reason, pattern);
}

bool same_config(const kube::ClusterConfig& a, const kube::ClusterConfig& b) {
  return a.server == b.server && a.ca_pem == b.ca_pem &&
         a.insecure_skip_tls_verify == b.insecure_skip_tls_verify &&
         a.tls_server_name == b.tls_server_name && a.proxy_url == b.proxy_url &&
         a.client_cert_pem == b.client_cert_pem && a.client_key_pem == b.client_key_pem &&
         a.token == b.token && a.token_file == b.token_file;
}

// What of a Node placement reads; a change elsewhere (heartbeats, images) is not worth waking
// the jobs that wait for GPUs.
json placement_fields(const json& node) {
  const json metadata = node.value("metadata", json::object());
  const json spec = node.value("spec", json::object());
  const json status = node.value("status", json::object());
  std::string ready;
  for (const json& c : status.value("conditions", json::array()))
    if (c.value("type", "") == "Ready") ready = c.value("status", "");
  return json::array({metadata.value("labels", json::object()),
                      metadata.value("annotations", json::object()),
                      spec.value("unschedulable", false), spec.value("taints", json::array()),
                      status.value("allocatable", json::object()), ready});
}

// What of a prober pod its peers elsewhere see (api::prober_endpoints reads these).
json endpoint_fields(const json& pod) {
  const json metadata = pod.value("metadata", json::object());
  const json spec = pod.value("spec", json::object());
  const json status = pod.value("status", json::object());
  json ports = json::array();
  for (const json& c : spec.value("containers", json::array()))
    ports.push_back(c.value("ports", json::array()));
  return json::array({metadata.value("deletionTimestamp", json()), spec.value("nodeName", json()),
                      status.value("phase", json()), status.value("podIP", json()), ports});
}

json node_addresses(const json& node) {
  return node.value("status", json::object()).value("addresses", json::array());
}

std::map<std::string, std::string> string_map(const json& object) {
  std::map<std::string, std::string> out;
  if (!object.is_object()) return out;
  for (const auto& [key, value] : object.items())
    if (value.is_string()) out[key] = value.get<std::string>();
  return out;
}

// Reachable False for a member whose API server refused or could not be reached.
Condition refused(const std::string& server, const char* what, const std::exception_ptr& error) {
  const std::string where = "cannot list and watch " + std::string(what) + " at " + server + ": ";
  try {
    std::rethrow_exception(error);
  } catch (const kube::ApiError& e) {
    return {"Reachable", "False", is_condition_reason(e.reason()) ? e.reason() : "ApiError",
            where + e.what()};
  } catch (const kube::TransportError& e) {
    return {"Reachable", "False", e.timed_out() ? "Timeout" : "Unreachable", where + e.what()};
  } catch (const std::exception& e) {
    return {"Reachable", "False", "Unreachable", where + e.what()};
  }
}

}  // namespace

std::vector<json> MemberView::nodes() const {
  std::vector<json> out;
  for (const kube::ObjectSnapshot& node : informers->nodes->store().list()) out.push_back(*node);
  return out;
}

std::vector<json> MemberView::pods() const {
  std::vector<json> out;
  std::set<std::string> seen;
  for (const kube::SharedInformer* informer :
       {informers->hub_pods.get(), informers->bound_pods.get()}) {
    for (const kube::ObjectSnapshot& pod : informer->store().list())
      if (seen.insert(kube::object_key(*pod)).second) out.push_back(*pod);
  }
  return out;
}

std::vector<json> MemberView::pods_of_job(const std::string& uid) const {
  std::vector<json> out;
  for (const kube::ObjectSnapshot& pod : informers->hub_pods->store().by_index(kJobUidIndex, uid))
    out.push_back(*pod);
  return out;
}

std::vector<json> MemberView::prober_pods() const {
  std::vector<json> out;
  for (const kube::ObjectSnapshot& pod :
       informers->bound_pods->store().by_index(kProberIndex, kProberIndex))
    out.push_back(*pod);
  return out;
}

std::shared_ptr<const json> MemberView::node(const std::string& name) const {
  return informers->nodes->store().get(name);
}

MemberRegistry::MemberRegistry(Options options,
                               std::function<void(const std::string&, const json&)> on_pod,
                               std::function<void(const std::string&)> on_nodes)
    : options_(std::move(options)),
      on_pod_(std::move(on_pod)),
      on_nodes_(std::move(on_nodes)),
      logger_(options_.logger ? options_.logger
                              : std::make_shared<const kube::Logger>("member-registry")),
      prober_selector_([&] {
        try {
          return kube::LabelSelector::parse(options_.prober_selector);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument("prober selector '" + options_.prober_selector +
                                      "' is not a label selector: " + e.what());
        }
      }()) {
  if (options_.hub_id.empty() || !is_label_value(options_.hub_id)) {
    throw std::invalid_argument("hub id '" + options_.hub_id +
                                "' is not a label value (1 to 63 letters, digits, '-', '_' or "
                                "'.', starting and ending with a letter or digit)");
  }
  if (options_.operator_namespace.empty())
    throw std::invalid_argument("member registry: the operator namespace is empty");
  if (options_.prober_namespace.empty())
    throw std::invalid_argument("member registry: the prober namespace is empty");
}

MemberRegistry::~MemberRegistry() { stop(); }

std::shared_ptr<MemberInformers> MemberRegistry::start(const std::string& name,
                                                       const kube::ClusterConfig& config) {
  const auto logger = std::make_shared<const kube::Logger>(logger_->with({{"member", name}}));
  kube::ClientOptions client_options = options_.client;
  if (!client_options.logger) client_options.logger = logger;
  if (options_.observe_client) client_options.on_response = options_.observe_client(name);
  auto m = std::make_shared<MemberInformers>();
  m->config = config;
  m->client = kube::Client::from_config(config, client_options);
  const auto informer = [&](const char* plural, std::string label_selector,
                            std::string field_selector) {
    kube::InformerOptions options;
    options.reflector.selectors.label_selector = std::move(label_selector);
    options.reflector.selectors.field_selector = std::move(field_selector);
    options.reflector.logger = logger;
    options.reflector.backoff = options_.reflector_backoff;
    return std::make_unique<kube::SharedInformer>(*m->client, resource(plural), "", options);
  };
  m->nodes = informer("nodes", "", "");
  m->hub_pods = informer("pods", std::string(kHubLabel) + "=" + options_.hub_id, "");
  // A job's pods are looked up on every reconcile of the job: by index, not by a scan.
  m->hub_pods->add_index(kJobUidIndex, [](const json& pod) {
    const std::optional<std::string> uid = kube::get_label(pod, kJobUidLabel);
    return uid ? std::vector<std::string>{*uid} : std::vector<std::string>{};
  });
  m->bound_pods = informer("pods", "", kBoundPodsSelector);
  const auto is_prober = [ns = options_.prober_namespace,
                          selector = prober_selector_](const json& pod) {
    return kube::object_namespace(pod) == ns && selector.matches(pod);
  };
  m->bound_pods->add_index(kProberIndex, [is_prober](const json& pod) {
    return is_prober(pod) ? std::vector<std::string>{kProberIndex} : std::vector<std::string>{};
  });
  m->bound_pods->add_index(kProberNodeIndex, [is_prober](const json& pod) {
    const std::string node = pod.value("spec", json::object()).value("nodeName", "");
    return is_prober(pod) && !node.empty() ? std::vector<std::string>{node}
                                           : std::vector<std::string>{};
  });

  const auto nodes_changed = [this, name] {
    if (on_nodes_) on_nodes_(name);
  };
  const auto probers_changed = [this, name] {
    if (options_.on_probers) options_.on_probers(name);
  };
  // A Node matters to the probers' peers when a prober runs on it (its ExternalIP is the host).
  const auto runs_prober = [bound = m->bound_pods.get()](const json& node) {
    return !bound->store().by_index(kProberNodeIndex, kube::object_name(node)).empty();
  };
  m->nodes->add_event_handler(kube::EventHandler{
      .on_add =
          [=](const json& node) {
            nodes_changed();
            if (runs_prober(node)) probers_changed();
          },
      .on_update =
          [=](const json& old_node, const json& new_node) {
            if (placement_fields(old_node) != placement_fields(new_node)) nodes_changed();
            if (node_addresses(old_node) != node_addresses(new_node) && runs_prober(new_node))
              probers_changed();
          },
      .on_delete =
          [=](const json& node, bool) {
            nodes_changed();
            if (runs_prober(node)) probers_changed();
          },
  });
  m->bound_pods->add_event_handler(kube::EventHandler{
      .on_add =
          [=](const json& pod) {
            if (is_prober(pod)) probers_changed();
          },
      .on_update =
          [=](const json& old_pod, const json& new_pod) {
            if ((is_prober(old_pod) || is_prober(new_pod)) &&
                (is_prober(old_pod) != is_prober(new_pod) ||
                 endpoint_fields(old_pod) != endpoint_fields(new_pod)))
              probers_changed();
          },
      .on_delete =
          [=](const json& pod, bool) {
            nodes_changed();
            if (is_prober(pod)) probers_changed();
          },
  });
  const auto pod_changed = [this, name](const json& pod) {
    if (on_pod_) on_pod_(name, pod);
  };
  m->hub_pods->add_event_handler(kube::EventHandler{
      .on_add = pod_changed,
      .on_update = [pod_changed](const json&, const json& pod) { pod_changed(pod); },
      .on_delete = [pod_changed](const json& pod, bool) { pod_changed(pod); },
  });
  m->nodes->start();
  m->hub_pods->start();
  m->bound_pods->start();
  logger_->info("member started", {{"member", name}, {"config", kube::describe(config)}});
  return m;
}

void MemberRegistry::retire(std::shared_ptr<MemberInformers> informers) {
  if (!informers) return;
  std::erase_if(retiring_, [](std::future<void>& f) {
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  });
  retiring_.push_back(
      std::async(std::launch::async, [informers = std::move(informers)] { informers->stop(); }));
}

Condition MemberRegistry::reachable(const MemberInformers& m) const {
  const kube::Clock::time_point now = kube::Clock::real().now();
  bool synced = true;
  for (const auto& [what, informer] : m.all()) {
    synced = synced && informer->has_synced();
    if (const auto failure = informer->reflector().failure()) {
      // Before the first list every failure counts; after it, only a lasting one.
      if (!informer->has_synced() || now - failure->since >= options_.unreachable_after)
        return refused(m.config.server, what, failure->error);
    }
  }
  if (!synced) {
    return {"Reachable", "Unknown", "Connecting",
            "waiting for the first list of Nodes and Pods at " + m.config.server};
  }
  return {"Reachable", "True", "Connected",
          "listing and watching Nodes and Pods at " + m.config.server};
}

MemberConnection MemberRegistry::update(const std::string& name, const json* member,
                                        const json* secret) {
  bool probers_changed = false;
  MemberConnection connection;
  {
    std::lock_guard lock(mutex_);
    connection = update_locked(name, member, secret, probers_changed);
  }
  if (probers_changed && options_.on_probers) options_.on_probers(name);
  return connection;
}

MemberConnection MemberRegistry::update_locked(const std::string& name, const json* member,
                                               const json* secret, bool& probers_changed) {
  const auto drop = [&] {
    if (const auto it = entries_.find(name); it != entries_.end()) {
      retire(std::move(it->second.informers));
      entries_.erase(it);
      probers_changed = true;  // its probers leave the other members' lists
      logger_->info("member stopped", {{"member", name}});
    }
  };
  if (!member) {
    drop();
    return {std::nullopt,
            {"Reachable", "Unknown", "Deleted", "MemberCluster " + name + " is gone"}};
  }
  MemberConnection connection = member_connection(*member, secret, options_.operator_namespace);
  if (!connection.config || stopped_) {
    drop();
    if (stopped_ && connection.config) {
      connection.config.reset();
      connection.reachable = {"Reachable", "Unknown", "OperatorStopping",
                              "the operator is stopping"};
    }
    return connection;
  }
  Entry& entry = entries_[name];
  if (!entry.informers || !same_config(entry.informers->config, *connection.config)) {
    const bool restart = entry.informers != nullptr;
    retire(std::move(entry.informers));
    try {
      entry.informers = start(name, *connection.config);
    } catch (const std::exception& e) {
      entries_.erase(name);
      probers_changed = restart;  // a running member's probers leave the lists
      connection.config.reset();
      connection.reachable = {"Reachable", "False", "KubeconfigInvalid",
                              "cannot make a client for " + name + ": " + e.what()};
      return connection;
    }
    entry.synced_announced = false;
    if (restart) logger_->info("member restarted: its kubeconfig changed", {{"member", name}});
  }
  const json spec = member->value("spec", json::object());
  entry.region = spec.value("region", "");
  entry.suspended = spec.value("suspend", false);
  entry.labels =
      string_map(member->value("metadata", json::object()).value("labels", json::object()));
  connection.reachable = reachable(*entry.informers);
  if (connection.reachable.status == "True" && !entry.synced_announced) {
    entry.synced_announced = true;  // its probers join the other members' lists
    probers_changed = true;
  }
  return connection;
}

std::shared_ptr<const MemberView> MemberRegistry::view(const std::string& name,
                                                       const Entry& entry) const {
  auto v = std::make_shared<MemberView>();
  v->name = name;
  v->region = entry.region;
  v->labels = entry.labels;
  v->suspended = entry.suspended;
  v->client = entry.informers->client;
  v->synced = entry.informers->nodes->has_synced() && entry.informers->hub_pods->has_synced() &&
              entry.informers->bound_pods->has_synced();
  v->reachable = reachable(*entry.informers);
  v->first_list_pending =
      !v->synced && (v->reachable.status != "False" ||
                     kube::Clock::real().now() - entry.informers->started <
                         options_.unreachable_after);
  v->informers = entry.informers;
  return v;
}

std::vector<std::shared_ptr<const MemberView>> MemberRegistry::members() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const MemberView>> out;
  for (const auto& [name, entry] : entries_) out.push_back(view(name, entry));
  return out;
}

std::shared_ptr<const MemberView> MemberRegistry::member(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : view(name, it->second);
}

std::size_t MemberRegistry::stopping() const {
  std::lock_guard lock(mutex_);
  std::size_t count = 0;
  for (const std::future<void>& f : retiring_)
    if (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) ++count;
  return count;
}

void MemberRegistry::stop() {
  std::vector<std::future<void>> retiring;
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    for (auto& [name, entry] : entries_) retire(std::move(entry.informers));
    entries_.clear();
    retiring.swap(retiring_);
  }
  for (std::future<void>& f : retiring) f.wait();
}

}  // namespace tessel::controller
