// The verbs of the Kubernetes API test server on stored objects: get, list, create, update,
// patch (merge, JSON, strategic merge, apply), delete and deletecollection, with the semantics
// kube-apiserver v1.26 shows (../shared/specs/kube-api-observed.md section 2). Errors are
// thrown as ApiError. The built-in controllers (garbage collector, namespace and CRD
// finalizers) write through the same verbs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/api_admission.h"
#include "tests/support/api_list.h"
#include "tests/support/api_resources.h"
#include "tests/support/api_router.h"
#include "tests/support/api_store.h"
#include "tests/support/builtin_semantics.h"

namespace tessel::testing {

// The object (or collection, when name is empty) a request names.
struct ObjectRef {
  std::shared_ptr<const ResourceType> type;
  std::string namespace_;
  std::string name;
  std::string subresource;  // "", "status", "finalize" (namespaces)
};

struct WriteOptions {
  bool dry_run = false;
  std::string manager;           // the field manager recorded in managedFields
  std::string field_validation;  // "Ignore", "Warn" ("" means Warn), "Strict"
  // Who asked, for a request that came through the API: admission webhooks see the write.
  // Unset for the built-in controllers' own writes, which skip webhook admission.
  std::optional<UserInfo> user = std::nullopt;
};

struct DeleteOptions {
  bool dry_run = false;
  std::optional<std::int64_t> grace_period_seconds;
  std::string propagation_policy;  // "", "Foreground", "Background", "Orphan"
  std::optional<bool> orphan_dependents;
  std::string precondition_uid;
  std::string precondition_resource_version;
  std::optional<UserInfo> user = std::nullopt;  // as in WriteOptions
};
// The query's options overridden by a DeleteOptions body, if any. ApiError 400 for a body
// that is not a DeleteOptions, 422 for an unknown propagationPolicy.
DeleteOptions parse_delete_options(const RequestOptions& query, const std::string& body);

struct VerbResult {
  int status = 200;
  nlohmann::json body;
  std::vector<std::string> warnings;  // Warning headers' texts
};

class ApiVerbs {
 public:
  // future_wait: how long a list waits for a resourceVersion the store has not reached.
  ApiVerbs(ObjectStore& store, ServedResources& resources, std::chrono::milliseconds future_wait);

  nlohmann::json get(const ObjectRef& ref) const;
  ListResult list(const ObjectRef& collection, const RequestOptions& options) const;
  VerbResult create(const ObjectRef& collection, nlohmann::json body, const WriteOptions& options);
  VerbResult update(const ObjectRef& ref, nlohmann::json body, const WriteOptions& options);
  // media_type: the Content-Type of the patch; force: apply's ?force.
  VerbResult patch(const ObjectRef& ref, const std::string& media_type, const std::string& body,
                   const WriteOptions& options, bool force);
  VerbResult remove(const ObjectRef& ref, const DeleteOptions& options);
  VerbResult remove_collection(const ObjectRef& collection, const RequestOptions& query,
                               const DeleteOptions& options);

  // For the built-in controllers: applies `change` to the current object (it returns false
  // when there is nothing to change) and stores it, retrying on conflicts. nullopt when the
  // object is gone.
  std::optional<nlohmann::json> mutate(const ObjectRef& ref,
                                       const std::function<bool(nlohmann::json&)>& change,
                                       const std::string& manager);
  // Creates the namespaces and service accounts a fresh cluster has.
  void create_initial_objects();

 private:
  using Propose = std::function<nlohmann::json(const nlohmann::json& current)>;
  struct UpdateRules {
    bool require_resource_version = false;  // a PUT of a custom resource
    bool managed_by_apply = false;          // managedFields come with the proposal
    bool create_if_missing = false;
    nlohmann::json create_body;  // what to create when missing (PUT, apply)
  };

  VerbResult commit_update(const ObjectRef& ref, const Propose& propose, const UpdateRules& rules,
                           const WriteOptions& options);
  VerbResult commit_create(const ObjectRef& ref, nlohmann::json object, const WriteOptions& options,
                           bool managed_by_apply);
  nlohmann::json prepare_update(const ObjectRef& ref, const nlohmann::json& current,
                                nlohmann::json proposed, const UpdateRules& rules,
                                const WriteOptions& options, std::vector<std::string>& warnings);
  VerbResult apply_patch(const ObjectRef& ref, const std::string& body, const WriteOptions& options,
                         bool force);
  // Namespace lifecycle and service account admission for a new object.
  void admit_create(const ResourceType& type, const nlohmann::json& object) const;
  // What follows a stored write: serving an established CRD, a namespace's service account.
  void after_created(const ResourceType& type, const nlohmann::json& object);
  void after_updated(const ResourceType& type, const nlohmann::json& object);
  void after_removed(const ResourceType& type, const nlohmann::json& object);
  // The delete verb once the object is read: graceful deletion, finalizers, removal.
  std::optional<VerbResult> try_remove(const ObjectRef& ref, const nlohmann::json& current,
                                       const DeleteOptions& options);
  VerbResult removed_result(const ResourceType& type, const nlohmann::json& last) const;
  std::shared_ptr<const ResourceType> builtin(const std::string& group,
                                              const std::string& resource) const;
  void release_cluster_ip(const ResourceType& type, const nlohmann::json& service);
  // Mutating admission webhooks on a create: they see the object as decoded, before the server
  // fills in uid, creationTimestamp, generation and a generated name.
  void mutate_created(const ObjectRef& ref, nlohmann::json& object, const WriteOptions& options,
                      bool name_generated, std::vector<std::string>& warnings) const;
  // What admission webhooks are told about a request on `ref` for the object `name`: the
  // operation (CREATE, UPDATE, DELETE) and its CreateOptions, UpdateOptions or DeleteOptions
  // (`fields` plus kind, apiVersion and dryRun).
  static AdmissionRequest admission_request(const ObjectRef& ref, const std::string& name,
                                            const std::string& operation, const UserInfo& user,
                                            bool dry_run, nlohmann::json fields);
  // The same for a create or update with these options (fieldManager shown); options.user set.
  static AdmissionRequest write_admission(const ObjectRef& ref, const std::string& name,
                                          const std::string& operation,
                                          const WriteOptions& options);
  // Decoding again what mutating webhooks changed (schema defaults and pruning, Go defaults).
  static void redecode(const ResourceType& type, nlohmann::json& object);

  ObjectStore& store_;
  ServedResources& resources_;
  std::chrono::milliseconds future_wait_;
  WebhookAdmission admission_;
  std::mutex cluster_ips_mutex_;
  ClusterIpAllocator cluster_ips_;
};

}  // namespace tessel::testing
