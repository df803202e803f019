#include "kube/lease_client.h"

#include <stdexcept>

namespace tessel::kube {

namespace {

ResourceInfo lease_resource() {
  const ResourceRegistry registry;
  const ResourceInfo* leases = registry.find_kind("coordination.k8s.io/v1", "Lease");
  if (leases == nullptr) throw std::logic_error("the builtin registry has no Lease resource");
  return *leases;
}

void require_lease(const nlohmann::json& lease, const char* verb) {
  if (!lease.is_object() || lease.value("kind", "") != "Lease") {
    throw std::invalid_argument(std::string("lease ") + verb + ": not a Lease object");
  }
}

}  // namespace

RestLeaseClient::RestLeaseClient(Client& client) : client_(client), leases_(lease_resource()) {}

nlohmann::json RestLeaseClient::get(const std::string& lease_namespace, const std::string& name) {
  return client_.get(leases_, lease_namespace, name);
}

nlohmann::json RestLeaseClient::create(const nlohmann::json& lease) {
  require_lease(lease, "create");
  return client_.create(leases_, "", lease);
}

nlohmann::json RestLeaseClient::update(const nlohmann::json& lease) {
  require_lease(lease, "update");
  return client_.update(leases_, lease);
}

}  // namespace tessel::kube
