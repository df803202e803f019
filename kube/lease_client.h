// The REST implementation of leader election's LeaseClient: coordination.k8s.io/v1 Leases
// through the Kubernetes client (GET, POST, PUT with the resourceVersion the elector read).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kube/client.h"
#include "kube/leader_election.h"
#include "kube/resource.h"

namespace tessel::kube {

class RestLeaseClient final : public LeaseClient {
 public:
  // The client must outlive this object.
  explicit RestLeaseClient(Client& client);

  nlohmann::json get(const std::string& lease_namespace, const std::string& name) override;
  nlohmann::json create(const nlohmann::json& lease) override;
  nlohmann::json update(const nlohmann::json& lease) override;

 private:
  Client& client_;
  const ResourceInfo leases_;
};

}  // namespace tessel::kube
