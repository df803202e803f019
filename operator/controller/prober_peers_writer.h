// Brings a member's cross-cluster peers ConfigMap in line with the one wanted
// (controller::prober_peers_configmap), through the member's API: created when missing, its
// peers.json updated when it differs (nothing written when equal), and a ConfigMap of that name
// that this hub's operator does not manage (no app.kubernetes.io/managed-by=tessel-operator, or
// another hub's tessel.dev/hub) left alone.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kube/client.h"

namespace tessel::controller {

enum class PeersWrite { kCreated, kUpdated, kUnchanged, kNotOurs };

struct PeersWriteResult {
  PeersWrite outcome = PeersWrite::kUnchanged;
  std::string why;  // kNotOurs: what the live ConfigMap's labels say
};

// Write conflicts (someone else wrote in between) are retried on the live object this often.
inline constexpr int kPeersWriteConflictRetries = 3;

// desired: prober_peers_configmap(...). Throws what the client throws (kube::ApiError,
// kube::TransportError) when the member refuses or cannot be reached, e.g. NotFound when the
// prober namespace does not exist, Forbidden without RBAC on configmaps.
PeersWriteResult write_prober_peers(kube::Client& member, const nlohmann::json& desired);

}  // namespace tessel::controller
