// What the Kubernetes API test server serves: the built-in resources tessel uses and the
// resources of every established CustomResourceDefinition, each with the per-kind behaviour
// the verbs need (status subresource, generation, graceful deletion, field selectors, schema,
// Table columns). Thread-safe; lookups return immutable snapshots.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/api_builtin_resources.h"
#include "tests/support/api_errors.h"
#include "tests/support/api_store.h"
#include "tests/support/managed_fields_merge_types.h"
#include "tests/support/structural_schema.h"
#include "tests/support/table_converter.h"

namespace tessel::testing {

struct ResourceType {
  ApiResource info;
  std::string singular;
  std::string list_kind;  // "PodList"
  bool custom = false;    // served for a CustomResourceDefinition
  std::string crd_name;   // "trainingjobs.tessel.dev" when custom
  std::vector<std::string> categories;
  // Custom resources: the CRD's entry of spec.versions, and its openAPIV3Schema (null when
  // it has none).
  nlohmann::json crd_version;
  std::shared_ptr<const StructuralSchema> schema;
  std::shared_ptr<const TableConverter> table;

  const std::string& group() const { return info.group; }
  const std::string& resource() const { return info.resource; }
  const std::string& kind() const { return info.kind; }
  std::string api_version() const { return info.api_version(); }
  bool namespaced() const { return info.namespaced; }
  GroupResource group_resource() const { return {info.group, info.resource}; }
  CollectionKey collection() const { return {info.group, info.resource}; }
  bool has_subresource(const std::string& subresource) const {
    return info.has_subresource(subresource);
  }

  // metadata.generation is kept (custom resources, CustomResourceDefinitions, Deployments,
  // DaemonSets, PodDisruptionBudgets, ValidatingAdmissionPolicies and their bindings).
  bool has_generation() const;
  // DELETE sets a grace period instead of removing at once (Pods).
  bool graceful_deletion() const;
  // DELETE answers the deleted object instead of a Status (Pods, Services).
  bool returns_deleted_object() const;
  // PUT of a missing object creates it (Leases, Events, Services, ServiceAccounts).
  bool allow_create_on_update() const;
  // PUT without metadata.resourceVersion is accepted (built-in kinds, not custom resources).
  bool allow_unconditional_update() const;
  // The fieldSelector labels beyond metadata.name and metadata.namespace.
  const std::vector<std::string>& extra_field_labels() const;
  // How server-side apply and managedFields treat the kind's lists and maps.
  MergeTypes merge_types() const;
};

class ServedResources {
 public:
  ServedResources();  // the built-in resources (served_builtin_resources())

  // nullptr when not served.
  std::shared_ptr<const ResourceType> find(const std::string& group, const std::string& version,
                                           const std::string& resource) const;
  std::shared_ptr<const ResourceType> find_kind(const std::string& api_version,
                                                const std::string& kind) const;
  std::vector<std::shared_ptr<const ResourceType>> all() const;
  bool serves_group(const std::string& group) const;
  bool serves_group_version(const std::string& group, const std::string& version) const;

  // Serves the established CRD's served versions (replacing what it served before). Throws
  // std::invalid_argument naming what is wrong with a version's schema or columns.
  void serve(const nlohmann::json& crd);
  void unserve(const std::string& crd_name);
  // The served CRDs, as stored when served.
  std::vector<nlohmann::json> crds() const;
  // Everything served, as the discovery documents list it.
  std::vector<ApiResource> resources() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const ResourceType>> types_;
  std::map<std::string, nlohmann::json> crds_;
};

// --- CustomResourceDefinitions ------------------------------------------------------------

// What the apiextensions server fills in on create: names.listKind and names.singular,
// conversion {strategy: None}, and a status with no conditions yet.
void default_crd(nlohmann::json& crd);
// Validation of a CRD on create and update (names, scope, versions, storage version,
// structural schemas, printer columns).
std::vector<FieldError> validate_crd(const nlohmann::json& crd);
// The status once the names are accepted: acceptedNames and the NamesAccepted and
// Established conditions, at `now` (RFC 3339).
nlohmann::json established_crd_status(const nlohmann::json& crd, const std::string& now);

}  // namespace tessel::testing
