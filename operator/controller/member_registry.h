// The member clusters the operator can reach, each with a client made from its kubeconfig and
// three informers: its Nodes, this hub's Pods (label tessel.dev/hub=<hub id>, every phase: the
// jobs' own pods), and every Pod bound to a node and not finished (they hold GPUs, whoever
// made them; the probers are among them). A member's informers start when its MemberCluster becomes
// usable, restart when the kubeconfig in its Secret changes, and stop when it goes or becomes
// unusable. Stopping never blocks the caller: a member whose API server hangs is stopped on a
// thread of its own.
//
// The MemberCluster reconciler calls update() with what the hub's informers hold; the
// TrainingJob reconciler reads members() and member(). Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/prober_peers.h"
#include "kube/client.h"
#include "kube/log.h"
#include "kube/object.h"
#include "kube/reflector.h"
#include "operator/controller/member_connection.h"

namespace tessel::controller {

struct MemberInformers;  // a member's client and informers (member_registry.cpp)

// One usable member, as it stood when the view was taken.
struct MemberView {
  std::string name;                           // the MemberCluster
  std::string region;                         // spec.region ("" when unset)
  std::map<std::string, std::string> labels;  // the MemberCluster's metadata.labels
  bool suspended = false;                     // spec.suspend: place no new tasklets here
  std::shared_ptr<kube::Client> client;
  bool synced = false;  // every informer has listed once
  // Reachable as the MemberCluster shows it: False while its informers have failed for
  // Options::unreachable_after (their caches then hold what was last seen).
  Condition reachable;
  // Not synced, and still connecting or started less than Options::unreachable_after ago: its
  // caches do not show yet what the member holds (the operator has just started, or the member
  // was just added), so the absence of a pod there says nothing. A member that has failed since
  // it started for that long is unreachable, as one that stops answering is.
  bool first_list_pending = false;

  // Every Node of the member.
  std::vector<nlohmann::json> nodes() const;
  // The member's pods the operator watches: this hub's (every phase) and every other pod bound
  // to a node and not finished, each once. What candidate_nodes needs to count held GPUs, and
  // what a job's pods are found among (by their tessel.dev/job-uid label).
  std::vector<nlohmann::json> pods() const;
  // This hub's pods of one job (label tessel.dev/job-uid), from an index.
  std::vector<nlohmann::json> pods_of_job(const std::string& uid) const;
  // The bound, unfinished pods in the prober namespace with the prober labels, from an index.
  std::vector<nlohmann::json> prober_pods() const;
  // One Node of the member; nullptr when it has none of that name.
  std::shared_ptr<const nlohmann::json> node(const std::string& name) const;

  std::shared_ptr<const MemberInformers> informers;  // the registry's; read through the above
};

class MemberRegistry {
 public:
  struct Options {
    std::string operator_namespace = "tessel-system";  // where the kubeconfig Secrets live
    std::string hub_id = "hub";                        // the tessel.dev/hub label's value
    kube::ClientOptions client;                        // of every member's client
    // When set, the on_response of the client of member `name` (its API requests counted under
    // its name); else client.on_response.
    std::function<std::function<void(std::string_view verb, int code)>(const std::string& name)>
        observe_client;
    std::shared_ptr<const kube::Logger> logger;  // nullptr: component "member-registry"
    // A member whose informers listed once but have failed for this long is unreachable (a
    // shorter failure is a watch being re-established, not worth a False condition).
    std::chrono::seconds unreachable_after{20};
    // Of every member informer after a failed list or watch (client-go's by default).
    kube::Backoff reflector_backoff = kube::reflector_backoff();
    // The probers: pods of this namespace matching this label selector (kube::LabelSelector's
    // string form; the constructor throws std::invalid_argument for a bad one).
    std::string prober_namespace = "tessel-system";
    std::string prober_selector = api::kProberSelector;
    // A member's probers changed as their peers elsewhere see them: a prober pod was added,
    // deleted or changed in what api::prober_endpoints reads; a Node that runs one was added,
    // deleted or changed its addresses; the member's informers listed for the first time, or
    // it stopped (gone or no longer usable). Runs on the member's informer threads or on the
    // caller of update(), never with the registry's lock held. May be empty.
    std::function<void(const std::string& cluster)> on_probers;
  };
  // on_pod: a pod of this hub in `cluster` was added, changed or deleted (its last state).
  // on_nodes: a Node of `cluster` changed in what placement reads (labels, annotations,
  // allocatable, Ready, unschedulable, taints), or a pod bound to a node there finished or went
  // (GPUs freed). Both run on the member's informer threads; either may be empty.
  MemberRegistry(Options options,
                 std::function<void(const std::string& cluster, const nlohmann::json& pod)> on_pod,
                 std::function<void(const std::string& cluster)> on_nodes);
  ~MemberRegistry();  // stop()
  MemberRegistry(const MemberRegistry&) = delete;
  MemberRegistry& operator=(const MemberRegistry&) = delete;

  // Brings the member `name` in line with its MemberCluster (nullptr: gone) and kubeconfig
  // Secret (nullptr: none): starts its informers, restarts them when the kubeconfig changed,
  // or stops them. Returns the connection: config unset with Reachable False (reason from
  // member_connection) when the kubeconfig is refused; else Reachable True (Connected) once
  // every informer has listed and none is failing, False when the member's API server refuses
  // or cannot be reached (reason: the API error's, e.g. Unauthorized or Forbidden; Unreachable
  // or Timeout without an answer; the message names the server and the error), Unknown
  // (Connecting) meanwhile. Never blocks on the member's API server.
  MemberConnection update(const std::string& name, const nlohmann::json* member,
                          const nlohmann::json* secret);

  // The members with a usable kubeconfig (synced or not: see MemberView::synced), by name.
  std::vector<std::shared_ptr<const MemberView>> members() const;
  // One of them; nullptr when it has no usable kubeconfig or is unknown.
  std::shared_ptr<const MemberView> member(const std::string& name) const;

  // Members being stopped on threads of their own (a retired member whose API server hangs
  // stays here until its list in flight times out).
  std::size_t stopping() const;

  // Stops every member's informers and waits for them. update() starts none afterwards.
  void stop();

  const std::string& operator_namespace() const { return options_.operator_namespace; }
  const std::string& hub_id() const { return options_.hub_id; }
  const std::string& prober_namespace() const { return options_.prober_namespace; }

 private:
  struct Entry {
    std::shared_ptr<MemberInformers> informers;
    std::string region;
    std::map<std::string, std::string> labels;
    bool suspended = false;
    bool synced_announced = false;  // on_probers was called for its informers' first list
  };

  // update() with mutex_ held; sets probers_changed when on_probers is due.
  MemberConnection update_locked(const std::string& name, const nlohmann::json* member,
                                 const nlohmann::json* secret, bool& probers_changed);
  std::shared_ptr<MemberInformers> start(const std::string& name,
                                         const kube::ClusterConfig& config);
  // Stops the informers on a thread of its own (an API server that hangs may hold a list in
  // flight for the request timeout); stop() waits for it. With mutex_ held.
  void retire(std::shared_ptr<MemberInformers> informers);
  Condition reachable(const MemberInformers& informers) const;
  std::shared_ptr<const MemberView> view(const std::string& name, const Entry& entry) const;

  const Options options_;
  const std::function<void(const std::string&, const nlohmann::json&)> on_pod_;
  const std::function<void(const std::string&)> on_nodes_;
  const std::shared_ptr<const kube::Logger> logger_;
  const kube::LabelSelector prober_selector_;

  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  std::vector<std::future<void>> retiring_;
  bool stopped_ = false;
};

}  // namespace tessel::controller
