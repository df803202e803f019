// The MemberCluster reconciler (key: the MemberCluster's name). Level-triggered: it reads the
// MemberCluster and its kubeconfig Secret from the hub informers' stores, brings the member
// registry in line (start, restart on a new kubeconfig, stop), and writes through the status
// subresource what the API schema of crds/tessel.dev_memberclusters.yaml allows:
//   conditions[Reachable]  True once the member's informers listed; False with the reason of
//                          member_connection (SecretNotFound, KubeconfigInvalid, ...) or of the
//                          member's API server (Unauthorized, Forbidden, Unreachable, ...);
//                          Unknown while connecting
//   nodes, gpus.total, gpus.free, probeCoverage   from the member's informers (member_status.h)
//   lastSeen               when the member last answered (refreshed at most every
//                          last_seen_refresh when nothing else changed)
//   observedGeneration
// Nothing is written when nothing changed, so its own writes do not make it loop. Events on
// every change of Reachable. It requeues itself so that the counts stay fresh.
//
// In the member itself, once it is Reachable and runs a prober pod, it keeps the cross-cluster
// peers ConfigMap (api/prober_peers.h) in the registry's prober namespace: the probers of every
// other synced member (prober_peers.h, prober_peers_writer.h). A failure there is logged and
// retried after unreachable_recheck; it touches no other member. The registry's on_probers must
// queue every MemberCluster, since a prober change in one member changes every other's list.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/log.h"
#include "kube/object_store.h"
#include "kube/resource.h"
#include "operator/controller/member_registry.h"

namespace tessel::controller {

struct MemberClusterReconcilerOptions {
  // Again after this long: a reachable member (counts stay fresh), or a refused kubeconfig
  // (a Secret change also brings it back, through members_using_secret).
  std::chrono::milliseconds resync{30'000};
  // Again after this long while the member is connecting (its first list is on the way).
  std::chrono::milliseconds connecting_recheck{1'000};
  // Again after this long while the member's API server refuses or cannot be reached.
  std::chrono::milliseconds unreachable_recheck{5'000};
  // lastSeen alone (nothing else changed) is rewritten at most this often: a status write per
  // member every resync would be noise in the hub's API server and its watchers.
  std::chrono::milliseconds last_seen_refresh{300'000};
  // Status writes that meet a conflict (409) are tried again on the live object this often.
  int conflict_retries = 5;
  std::function<std::chrono::system_clock::time_point()> now;  // empty: the system clock
  std::shared_ptr<const kube::Logger> logger;                  // nullptr: component "membercluster"
};

class MemberClusterReconciler {
 public:
  // Everything passed must outlive the reconciler. members: the hub informer's MemberClusters;
  // secrets: the hub informer's Secrets in registry.operator_namespace().
  MemberClusterReconciler(kube::Client& hub, kube::ResourceInfo members_resource,
                          const kube::ObjectStore& members, const kube::ObjectStore& secrets,
                          MemberRegistry& registry, kube::EventRecorder& events,
                          MemberClusterReconcilerOptions options = {});

  kube::ReconcileResult reconcile(const std::string& name);

 private:
  // The status `member` should have now, from its current status.
  nlohmann::json desired_status(const nlohmann::json& member, const MemberConnection& connection,
                                const std::string& name, bool refresh_last_seen) const;
  // Writes `status` unless it is there already; on a conflict, recomputes on the live object.
  void write_status(nlohmann::json member, const MemberConnection& connection,
                    const std::string& name);
  std::string now_text() const;
  // Brings the member's cross-cluster peers ConfigMap in line; false when that failed.
  bool sync_prober_peers(const std::string& name);

  kube::Client& hub_;
  const kube::ResourceInfo members_resource_;
  const kube::ObjectStore& members_;
  const kube::ObjectStore& secrets_;
  MemberRegistry& registry_;
  kube::EventRecorder& events_;
  const MemberClusterReconcilerOptions options_;
  const std::shared_ptr<const kube::Logger> logger_;

  mutable std::mutex mutex_;
  std::map<std::string, std::chrono::steady_clock::time_point> last_seen_written_;
};

// The MemberClusters (names) whose kubeconfigSecretRef names this Secret: the keys to queue
// when a Secret in the operator's namespace changes.
std::vector<std::string> members_using_secret(const kube::ObjectStore& members,
                                              const nlohmann::json& secret);

}  // namespace tessel::controller
