// How the operator reaches a member cluster: the MemberCluster names a Secret in the operator's
// namespace whose key holds a kubeconfig; this reads it under the member's policy (no files,
// no plugins, TLS verified unless spec.allowInsecureTLS) and says, as a Reachable condition,
// why not when it cannot. Pure: the caller fetched both objects.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kube/config.h"
#include "operator/controller/conditions.h"

namespace tessel::controller {

struct MemberConnection {
  std::optional<kube::ClusterConfig> config;  // set when the kubeconfig is usable
  // When config is unset: Reachable False with the reason (SecretNotFound, KubeconfigMissing,
  // KubeconfigInvalid) and a message naming the Secret, key and field at fault. When set:
  // Reachable Unknown (Connecting) until the member's API server answers.
  Condition reachable;
};

// member: the MemberCluster; secret: its kubeconfig Secret, or nullptr when there is none;
// secret_namespace: the operator's namespace, where the Secret lives.
MemberConnection member_connection(const nlohmann::json& member, const nlohmann::json* secret,
                                   const std::string& secret_namespace);

}  // namespace tessel::controller
