#include "noderuntime/prober/app/prober_daemon.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kube/object.h"
#include "kube/resource.h"
#include "noderuntime/prober/node_annotator.h"
#include "noderuntime/prober/peer_directory.h"
#include "noderuntime/prober/probe_error.h"

namespace tessel::prober {
namespace {

using nlohmann::json;

bool same_peer(const ProbePeer& a, const ProbePeer& b) {
  return a.name == b.name && a.host == b.host && a.port == b.port;
}

}  // namespace

ProberDaemon::ProberDaemon(kube::Client& client, ProberDaemonOptions options)
    : client_(client),
      options_(std::move(options)),
      logger_(options_.logger ? options_.logger
                              : std::make_shared<const kube::Logger>("tessel-prober")),
      random_(options_.schedule.seed != 0 ? options_.schedule.seed : std::random_device{}()) {
  if (options_.node_name.empty()) throw ProbeError("prober daemon: node_name is empty");
  if (options_.reevaluate_every <= std::chrono::milliseconds::zero() ||
      options_.publish_retry_initial <= std::chrono::milliseconds::zero() ||
      options_.publish_retry_max < options_.publish_retry_initial) {
    throw ProbeError(
        "prober daemon: reevaluate_every and publish_retry_initial must be positive, and "
        "publish_retry_max at least publish_retry_initial");
  }
  options_.probe.self_name = options_.node_name;
  options_.server.secret = options_.probe.secret;
  check_probe_options(options_.probe);
  check_probe_server_options(options_.server);
  check_schedule_options(options_.schedule);
  check_link_book_options(options_.book);
  listener_.emplace(transport::TcpListener::bind(options_.listen_host, options_.listen_port));
  port_ = listener_->port();
}

void ProberDaemon::wake() {
  {
    std::lock_guard lock(mutex_);
    changed_ = true;
  }
  changed_cv_.notify_all();
}

void ProberDaemon::wait(Clock::time_point until, std::stop_token stop) {
  std::unique_lock lock(mutex_);
  changed_cv_.wait_until(lock, stop, until, [this] { return changed_; });
}

void ProberDaemon::run(std::stop_token stop) {
  if (!listener_) throw std::logic_error("ProberDaemon::run called twice");
  ProbeServer server(std::move(*listener_), options_.server, [this](const std::string& error) {
    logger_->warning("probe session failed", {{"error", error}});
  });
  listener_.reset();

  const kube::ResourceRegistry registry;
  const kube::EventHandler on_change{.on_add = [this](const json&) { wake(); },
                                     .on_update = [this](const json&, const json&) { wake(); },
                                     .on_delete = [this](const json&, bool) { wake(); }};
  kube::InformerOptions pod_options;
  pod_options.reflector.selectors.label_selector = options_.peer_selector;
  pod_options.reflector.logger = logger_;
  kube::SharedInformer pods(client_, *registry.find_kind("v1", "Pod"), options_.namespace_name,
                            pod_options);
  kube::InformerOptions config_map_options;
  config_map_options.reflector.selectors.field_selector =
      "metadata.name=" + options_.peers_configmap;
  config_map_options.reflector.logger = logger_;
  kube::SharedInformer config_maps(client_, *registry.find_kind("v1", "ConfigMap"),
                                   options_.namespace_name, config_map_options);
  pods.add_event_handler(on_change);
  config_maps.add_event_handler(on_change);
  pods.start();
  config_maps.start();
  logger_->info("prober started", {{"node", options_.node_name},
                                   {"listen", options_.listen_host + ":" + std::to_string(port_)},
                                   {"namespace", options_.namespace_name},
                                   {"peer_selector", options_.peer_selector},
                                   {"peers_configmap", options_.peers_configmap}});
  if (!pods.wait_for_sync(stop) || !config_maps.wait_for_sync(stop)) return;

  ProbeSchedule schedule(options_.schedule, options_.probe);
  LinkBook book(options_.book);
  {
    std::lock_guard lock(mutex_);
    changed_ = false;
  }
  refresh_peers(pods, config_maps, schedule, book);
  resume_published(book);
  while (!stop.stop_requested()) {
    bool changed = false;
    {
      std::lock_guard lock(mutex_);
      std::swap(changed, changed_);
    }
    if (changed) refresh_peers(pods, config_maps, schedule, book);
    publish_if_due(book);
    const auto next = schedule.next();
    const Clock::time_point now = Clock::now();
    if (next && next->first <= now) {
      run_probe(next->second, schedule, book);
      continue;
    }
    Clock::time_point until = now + options_.reevaluate_every;
    if (next) until = std::min(until, next->first);
    if (publish_retry_at_ > now) until = std::min(until, publish_retry_at_);
    wait(until, stop);
  }
  logger_->info("prober stopping", {{"node", options_.node_name}});
}

void ProberDaemon::read_peers_config_map(const kube::SharedInformer& config_maps) {
  const std::string key = options_.namespace_name + "/" + options_.peers_configmap;
  const kube::ObjectSnapshot config_map = config_maps.store().get(key);
  if (!config_map) {
    if (!config_map_version_.empty()) {
      logger_->info("peers ConfigMap gone: no cross-cluster peers", {{"configmap", key}});
    }
    cross_.reset();
    config_map_version_.clear();
    return;
  }
  const std::string version = kube::object_resource_version(*config_map);
  if (version == config_map_version_) return;
  config_map_version_ = version;
  const std::string source = "ConfigMap " + key;
  try {
    const auto data = config_map->find("data");
    if (data == config_map->end() || !data->is_object() || !data->contains(api::kProberPeersKey) ||
        !(*data)[api::kProberPeersKey].is_string()) {
      throw std::invalid_argument(source + ": data[" + api::kProberPeersKey + "] is missing");
    }
    cross_ = api::parse_prober_peers((*data)[api::kProberPeersKey].get<std::string>(), source);
    logger_->info(
        "cross-cluster peers read",
        {{"configmap", key}, {"cluster", cross_->cluster}, {"peers", cross_->peers.size()}});
  } catch (const std::exception& e) {
    logger_->error("peers ConfigMap refused; the last good peers are kept",
                   {{"configmap", key},
                    {"error", e.what()},
                    {"kept_peers", cross_ ? cross_->peers.size() : 0}});
  }
}

void ProberDaemon::refresh_peers(const kube::SharedInformer& pods,
                                 const kube::SharedInformer& config_maps, ProbeSchedule& schedule,
                                 LinkBook& book) {
  read_peers_config_map(config_maps);
  std::vector<json> pod_objects;
  for (const kube::ObjectSnapshot& pod : pods.store().list()) pod_objects.push_back(*pod);
  const std::vector<ProbePeer> peers =
      probe_peers(api::prober_endpoints(pod_objects), options_.node_name, cross_);

  size_t added = 0, moved = 0;
  std::map<std::string, ProbePeer> next;
  std::vector<std::string> names;
  for (const ProbePeer& peer : peers) {
    const auto old = peers_.find(peer.name);
    if (old == peers_.end()) {
      ++added;
    } else if (!same_peer(old->second, peer)) {
      ++moved;
    }
    names.push_back(peer.name);
    next.emplace(peer.name, peer);
  }
  const size_t removed = peers_.size() + added - next.size();
  if (added == 0 && moved == 0 && removed == 0) return;
  for (const auto& [name, peer] : peers_) {
    if (next.count(name) == 0) logger_->info("peer left", {{"peer", name}});
  }
  peers_ = std::move(next);
  const Clock::time_point now = Clock::now();
  schedule.set_peers(names, now);
  book.set_peers(names);
  logger_->info("peers changed", {{"peers", peers_.size()},
                                  {"added", added},
                                  {"removed", removed},
                                  {"address_changed", moved}});
}

void ProberDaemon::resume_published(LinkBook& book) {
  json node;
  try {
    node = client_.get(*kube::ResourceRegistry().find_kind("v1", "Node"), "", options_.node_name);
  } catch (const std::exception& e) {
    logger_->warning("could not read the Node's links; starting afresh",
                     {{"node", options_.node_name}, {"error", e.what()}});
    return;
  }
  const json annotations = node["metadata"].value("annotations", json::object());
  const auto value = annotations.find(api::kLinksAnnotation);
  if (value == annotations.end() || !value->is_string()) return;
  api::NodeLinks links;
  try {
    links = api::parse_node_links(value->get<std::string>(), options_.node_name);
  } catch (const std::exception& e) {
    logger_->warning("the Node's links do not parse; starting afresh",
                     {{"node", options_.node_name}, {"error", e.what()}});
    return;
  }
  const auto wall_now = std::chrono::system_clock::now();
  const Clock::time_point now = Clock::now();
  size_t resumed = 0;
  for (const auto& [peer, measurement] : links.peers) {
    if (api::is_aggregate(peer) || peers_.count(peer) == 0) continue;
    const auto at = api::parse_measured_at(measurement.measured_at);
    if (!at) continue;
    const auto age = wall_now - *at;
    if (age < std::chrono::seconds::zero() || age >= options_.book.peer_ttl) continue;
    book.record_full(peer, measurement, now - std::chrono::duration_cast<Clock::duration>(age));
    ++resumed;
  }
  logger_->info("resumed the links published before",
                {{"node", options_.node_name}, {"peers", resumed}});
}

void ProberDaemon::run_probe(const PlannedProbe& planned, ProbeSchedule& schedule, LinkBook& book) {
  const auto found = peers_.find(planned.peer);
  if (found == peers_.end()) {
    throw std::logic_error("prober schedule planned unknown peer " + planned.peer);
  }
  const ProbePeer& peer = found->second;
  ProbeOptions options = options_.probe;
  options.emulated_link = emulated_shape(options_.emulated_links, peer.name);
  const bool full = planned.kind == ProbeKind::kFull;
  if (full) options.max_bytes = planned.max_bytes;
  std::optional<ProbeResult> result;
  try {
    result = full ? measure_peer(peer, options) : measure_round_trips(peer, options);
  } catch (const ProbeBusy&) {
    // The peer serves another prober's probe (one session at a time): try again in a moment,
    // neither a failure (no back-off, no step toward age-out) nor bytes spent. The refusal
    // comes before authentication, so a stranger in the peer's place could fake it, but only to
    // delay the probe: a peer that never completes one still ages out after peer_ttl.
    const auto pause = std::uniform_int_distribution<int64_t>(kBusyRetryMin.count(),
                                                              kBusyRetryMax.count())(random_);
    schedule.postpone(peer.name, Clock::now() + std::chrono::milliseconds(pause));
    logger_->debug(
        "peer busy; probe postponed",
        {{"peer", peer.name}, {"kind", probe_kind_name(planned.kind)}, {"retry_in_ms", pause}});
    return;
  } catch (const std::exception& e) {
    const Clock::time_point now = Clock::now();
    schedule.record(planned, now, nullptr);
    book.record_failure(peer.name, now);
    logger_->warning(
        "probe failed",
        {{"peer", peer.name}, {"kind", probe_kind_name(planned.kind)}, {"error", e.what()}});
    return;
  }
  const Clock::time_point now = Clock::now();
  schedule.record(planned, now, &*result);
  const api::LinkMeasurement& m = result->measurement;
  if (full) {
    book.record_full(peer.name, m, now);
  } else {
    book.record_check(peer.name, now);
  }
  logger_->log(full ? kube::LogLevel::kInfo : kube::LogLevel::kDebug, "probed",
               {{"peer", peer.name},
                {"kind", probe_kind_name(planned.kind)},
                {"rtt_p50_ms", m.rtt_p50_ms},
                {"rtt_p90_ms", m.rtt_p90_ms},
                {"small_gbps", m.small_gbps},
                {"bulk_gbps", m.bulk_gbps},
                {"streams", m.streams},
                {"stream_gbps", m.stream_gbps},
                {"bytes", result->bytes_sent}});
}

void ProberDaemon::log_aged_out(const api::NodeLinks& links) {
  std::set<std::string> listed, aggregates;
  for (const auto& [name, measurement] : links.peers) {
    (api::is_aggregate(name) ? aggregates : listed).insert(name);
  }
  for (const std::string& name : listed_) {
    if (listed.count(name) != 0 || peers_.count(name) == 0) continue;  // listed, or left
    // Beyond max_listed_peers a peer may have moved into its site's aggregate.
    if (aggregates.count(api::site_aggregate(name)) != 0) continue;
    logger_->warning("peer aged out", {{"peer", name},
                                       {"peer_ttl_s", options_.book.peer_ttl.count()},
                                       {"max_failures", options_.book.max_failures}});
  }
  listed_ = std::move(listed);
}

void ProberDaemon::publish_if_due(const LinkBook& book) {
  const Clock::time_point now = Clock::now();
  const api::NodeLinks candidate = book.links(now);
  log_aged_out(candidate);
  // Nothing measured yet: the Node keeps what an earlier run published (its `at` ages it).
  if (!published_ && candidate.peers.empty()) return;
  if (now < publish_retry_at_) return;
  if (!book.should_publish(published_, published_at_, candidate, now)) return;
  try {
    publish_node_links(client_, options_.node_name, candidate);
    published_ = candidate;
    published_at_ = now;
    publish_retry_delay_ = std::chrono::milliseconds::zero();
    logger_->info("published links", {{"node", options_.node_name},
                                      {"peers", candidate.peers.size()},
                                      {"bytes", api::format_node_links(candidate).size()}});
  } catch (const std::exception& e) {
    publish_retry_delay_ = publish_retry_delay_ == std::chrono::milliseconds::zero()
                               ? options_.publish_retry_initial
                               : std::min(2 * publish_retry_delay_, options_.publish_retry_max);
    publish_retry_at_ = now + publish_retry_delay_;
    logger_->error("publishing links failed; will retry",
                   {{"node", options_.node_name},
                    {"error", e.what()},
                    {"retry_in_ms", publish_retry_delay_.count()}});
  }
}

}  // namespace tessel::prober
