#include "operator/controller/membercluster_reconciler.h"

#include <utility>

#include "kube/api_error.h"
#include "kube/object.h"
#include "operator/controller/conditions.h"
#include "operator/controller/member_status.h"
#include "operator/controller/prober_peers.h"
#include "operator/controller/prober_peers_writer.h"

namespace tessel::controller {

using nlohmann::json;

namespace {

std::string secret_name(const json& member) {
  return member.value("spec", json::object())
      .value("kubeconfigSecretRef", json::object())
      .value("name", "");
}

// Reachable's status and reason in `status`, "" when it has none.
std::pair<std::string, std::string> reachable_of(const json& status) {
  const json conditions = status.value("conditions", json::array());
  const json* c = find_condition(conditions, "Reachable");
  if (!c) return {"", ""};
  return {c->value("status", ""), c->value("reason", "")};
}

}  // namespace

std::vector<std::string> members_using_secret(const kube::ObjectStore& members,
                                              const json& secret) {
  std::vector<std::string> names;
  const std::string name = kube::object_name(secret);
  for (const kube::ObjectSnapshot& member : members.list())
    if (secret_name(*member) == name) names.push_back(kube::object_name(*member));
  return names;
}

MemberClusterReconciler::MemberClusterReconciler(
    kube::Client& hub, kube::ResourceInfo members_resource, const kube::ObjectStore& members,
    const kube::ObjectStore& secrets, MemberRegistry& registry, kube::EventRecorder& events,
    MemberClusterReconcilerOptions options)
    : hub_(hub),
      members_resource_(std::move(members_resource)),
      members_(members),
      secrets_(secrets),
      registry_(registry),
      events_(events),
      options_(std::move(options)),
      logger_(options_.logger ? options_.logger
                              : std::make_shared<const kube::Logger>("membercluster")) {}

std::string MemberClusterReconciler::now_text() const {
  return kube::format_rfc3339(options_.now ? options_.now() : std::chrono::system_clock::now());
}

kube::ReconcileResult MemberClusterReconciler::reconcile(const std::string& name) {
  const kube::ObjectSnapshot member = members_.get(name);
  if (!member || kube::is_being_deleted(*member)) {
    registry_.update(name, nullptr, nullptr);
    std::lock_guard lock(mutex_);
    last_seen_written_.erase(name);
    return {};
  }
  const kube::ObjectSnapshot secret =
      secrets_.get(registry_.operator_namespace() + "/" + secret_name(*member));
  const MemberConnection connection = registry_.update(name, member.get(), secret.get());
  write_status(*member, connection, name);

  const Condition& reachable = connection.reachable;
  kube::ReconcileResult result;
  if (reachable.status == "True") {
    result.requeue_after = sync_prober_peers(name) ? options_.resync : options_.unreachable_recheck;
  } else if (!connection.config) {
    result.requeue_after = options_.resync;
  } else if (reachable.status == "Unknown") {
    result.requeue_after = options_.connecting_recheck;
  } else {
    result.requeue_after = options_.unreachable_recheck;
  }
  return result;
}

bool MemberClusterReconciler::sync_prober_peers(const std::string& name) {
  const auto view = registry_.member(name);
  // A member without a prober has no reader of the list (and maybe no prober namespace).
  if (!view || !view->synced || view->prober_pods().empty()) return true;
  std::map<std::string, std::vector<api::ProberPeer>> probers;
  for (const auto& other : registry_.members()) {
    if (other->name == name || !other->synced) continue;
    const std::vector<api::ProberEndpoint> endpoints = api::prober_endpoints(other->prober_pods());
    std::map<std::string, std::string> external_ips;
    for (const api::ProberEndpoint& e : endpoints) {
      if (const auto node = other->node(e.node))
        if (const auto ip = external_ip(*node)) external_ips[e.node] = *ip;
    }
    probers[other->name] = member_probers(other->name, endpoints, external_ips);
  }
  const DesiredProberPeers desired = prober_peers_for(name, probers);
  const std::string where = registry_.prober_namespace() + "/" + api::kProberPeersConfigMap;
  if (desired.left_out > 0) {
    logger_->warning("the prober peers list is full: peers left out",
                     {{"member", name},
                      {"configmap", where},
                      {"listed", std::to_string(desired.peers.peers.size())},
                      {"left_out", std::to_string(desired.left_out)}});
  }
  try {
    const PeersWriteResult result = write_prober_peers(
        *view->client,
        prober_peers_configmap(registry_.prober_namespace(), registry_.hub_id(), desired.peers));
    if (result.outcome == PeersWrite::kNotOurs) {
      logger_->warning("leaving alone a ConfigMap this operator does not manage",
                       {{"member", name}, {"configmap", where}, {"why", result.why}});
    } else if (result.outcome != PeersWrite::kUnchanged) {
      logger_->info(
          result.outcome == PeersWrite::kCreated ? "prober peers created" : "prober peers updated",
          {{"member", name},
           {"configmap", where},
           {"peers", std::to_string(desired.peers.peers.size())}});
    }
    return true;
  } catch (const std::exception& e) {
    logger_->warning("cannot write the prober peers ConfigMap",
                     {{"member", name}, {"configmap", where}, {"error", e.what()}});
    return false;
  }
}

json MemberClusterReconciler::desired_status(const json& member, const MemberConnection& connection,
                                             const std::string& name,
                                             bool refresh_last_seen) const {
  const std::int64_t generation = kube::object_generation(member);
  json status = member.value("status", json::object());
  if (!status.is_object()) status = json::object();
  json conditions = status.value("conditions", json::array());
  set_condition(conditions, connection.reachable, generation, now_text());
  status["conditions"] = std::move(conditions);
  status["observedGeneration"] = generation;
  const auto view = registry_.member(name);
  if (connection.reachable.status == "True" && view && view->synced) {
    std::map<std::string, std::vector<std::string>> elsewhere;
    for (const auto& other : registry_.members())
      if (other->name != name && other->synced)
        elsewhere[other->name] = usable_gpu_nodes(other->nodes());
    const MemberCounts counts = count_member(name, view->nodes(), view->pods(), elsewhere);
    status["nodes"] = counts.nodes;
    status["gpus"] = {{"total", counts.gpus_total}, {"free", counts.gpus_free}};
    status["probeCoverage"] = counts.probe_coverage();
    if (refresh_last_seen || !status.contains("lastSeen")) status["lastSeen"] = now_text();
  }
  return status;
}

void MemberClusterReconciler::write_status(json member, const MemberConnection& connection,
                                           const std::string& name) {
  for (int attempt = 0;; ++attempt) {
    const json old = member.value("status", json::object());
    bool refresh = false;
    {
      std::lock_guard lock(mutex_);
      const auto it = last_seen_written_.find(name);
      refresh = it == last_seen_written_.end() ||
                std::chrono::steady_clock::now() - it->second >=
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        options_.last_seen_refresh);
    }
    json status = desired_status(member, connection, name, refresh);
    if (status == old) return;
    // Something else changed: the member answered now, so lastSeen goes along.
    if (!refresh) {
      json without = status;
      without.erase("lastSeen");
      json old_without = old;
      old_without.erase("lastSeen");
      if (without != old_without && connection.reachable.status == "True")
        status = desired_status(member, connection, name, true);
    }
    json body = member;
    body["status"] = status;
    try {
      hub_.update_status(members_resource_, body);
    } catch (const kube::ApiError& error) {
      if (error.is_not_found()) return;  // gone: the next reconcile stops it
      if (!error.is_conflict() || attempt >= options_.conflict_retries) throw;
      member = hub_.get(members_resource_, "", name);
      continue;
    }
    if (status.contains("lastSeen") && status["lastSeen"] != old.value("lastSeen", json())) {
      std::lock_guard lock(mutex_);
      last_seen_written_[name] = std::chrono::steady_clock::now();
    }
    const auto before = reachable_of(old);
    const auto after = reachable_of(status);
    if (before != after && after.first != "Unknown") {
      const Condition& c = connection.reachable;
      if (c.status == "True") {
        events_.record(body, kube::EventType::kNormal, "Reachable", c.message);
      } else {
        events_.record(body, kube::EventType::kWarning, c.reason, c.message);
      }
    }
    return;
  }
}

}  // namespace tessel::controller
