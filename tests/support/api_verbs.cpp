// get, list and create (the other verbs: api_update.cpp, api_delete.cpp).
#include "tests/support/api_verbs.h"

#include "tests/support/api_errors.h"
#include "tests/support/api_object_meta.h"
#include "tests/support/api_object_rules.h"
#include "tests/support/builtin_semantics.h"
#include "tests/support/managed_fields.h"

namespace tessel::testing {
using nlohmann::json;

ApiVerbs::ApiVerbs(ObjectStore& store, ServedResources& resources,
                   std::chrono::milliseconds future_wait)
    : store_(store), resources_(resources), future_wait_(future_wait), admission_(store) {}

AdmissionRequest ApiVerbs::admission_request(const ObjectRef& ref, const std::string& name,
                                             const std::string& operation, const UserInfo& user,
                                             bool dry_run, json fields) {
  const ResourceType& type = *ref.type;
  const bool is_namespace = type.group().empty() && type.resource() == "namespaces";
  fields["kind"] = operation == "CREATE"   ? "CreateOptions"
                   : operation == "UPDATE" ? "UpdateOptions"
                                           : "DeleteOptions";
  fields["apiVersion"] = "meta.k8s.io/v1";
  if (dry_run) fields["dryRun"] = json::array({"All"});
  return {&type, ref.subresource, operation, is_namespace ? name : ref.namespace_, name,
          user,  dry_run,         fields};
}

AdmissionRequest ApiVerbs::write_admission(const ObjectRef& ref, const std::string& name,
                                           const std::string& operation,
                                           const WriteOptions& options) {
  json fields = json::object();
  if (!options.manager.empty()) fields["fieldManager"] = options.manager;
  return admission_request(ref, name, operation, *options.user, options.dry_run, fields);
}

void ApiVerbs::redecode(const ResourceType& type, json& object) {
  std::vector<std::string> ignored;
  decode_defaults(type, object, "Ignore", ignored);
}

void ApiVerbs::mutate_created(const ObjectRef& ref, json& object, const WriteOptions& options,
                              bool name_generated, std::vector<std::string>& warnings) const {
  if (!options.user) return;
  const ResourceType& type = *ref.type;
  json decoded = object;
  json& metadata = decoded["metadata"];
  for (const char* filled_in : {"uid", "creationTimestamp", "generation"})
    metadata.erase(filled_in);
  if (name_generated) metadata.erase("name");
  const json before = decoded;
  admission_.mutate(write_admission(ref, meta_string(decoded, "name"), "CREATE", options), decoded,
                    nullptr, warnings);
  if (decoded == before) return;
  redecode(type, decoded);
  for (const char* filled_in : {"uid", "creationTimestamp", "generation"}) {
    if (object["metadata"].contains(filled_in))
      decoded["metadata"][filled_in] = object["metadata"][filled_in];
  }
  if (name_generated) decoded["metadata"]["name"] = object["metadata"]["name"];
  object = std::move(decoded);
}

std::shared_ptr<const ResourceType> ApiVerbs::builtin(const std::string& group,
                                                      const std::string& resource) const {
  const std::string version = "v1";
  return resources_.find(group, version, resource);
}

json ApiVerbs::get(const ObjectRef& ref) const {
  const ResourceType& type = *ref.type;
  const std::optional<json> object = store_.get(type.collection(), ref.namespace_, ref.name);
  if (!object) throw not_found(type.group_resource(), ref.name);
  return in_version(*object, type);
}

ListResult ApiVerbs::list(const ObjectRef& collection, const RequestOptions& options) const {
  return list_collection(store_, *collection.type, collection.namespace_, options, future_wait_);
}

VerbResult ApiVerbs::create(const ObjectRef& collection, json body, const WriteOptions& options) {
  check_decodable(*collection.type, body);
  return commit_create(collection, std::move(body), options, false);
}

VerbResult ApiVerbs::commit_create(const ObjectRef& ref, json object, const WriteOptions& options,
                                   bool managed_by_apply) {
  const ResourceType& type = *ref.type;
  json& metadata = object["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  if (type.namespaced()) {
    const std::string given = meta_string(object, "namespace");
    if (!given.empty() && given != ref.namespace_) {
      throw bad_request(
          "the namespace of the provided object does not match the namespace sent "
          "on the request");
    }
    metadata["namespace"] = ref.namespace_;
  } else {
    metadata.erase("namespace");
  }
  if (!ref.name.empty()) {
    const std::string given = meta_string(object, "name");
    if (!given.empty() && given != ref.name) {
      throw bad_request("the name of the object (" + given +
                        ") does not match the name on the URL (" + ref.name + ")");
    }
    metadata["name"] = ref.name;
  }
  const bool name_generated =
      meta_string(object, "name").empty() && !meta_string(object, "generateName").empty();
  if (name_generated) metadata["name"] = generated_name(meta_string(object, "generateName"));
  if (!meta_string(object, "resourceVersion").empty()) {
    throw internal_error("resourceVersion should not be set on objects to be created");
  }
  metadata.erase("resourceVersion");
  metadata.erase("deletionTimestamp");
  metadata.erase("deletionGracePeriodSeconds");
  metadata.erase("selfLink");
  metadata["uid"] = new_uid();
  metadata["creationTimestamp"] = now_rfc3339();
  if (type.has_generation()) {
    metadata["generation"] = 1;
  } else {
    metadata.erase("generation");
  }
  admit_create(type, object);
  std::vector<std::string> warnings;
  if (type.custom && type.has_subresource("status")) object.erase("status");
  decode_defaults(type, object, options.field_validation, warnings);
  const bool is_crd = type.resource() == "customresourcedefinitions";
  if (is_crd) default_crd(object);
  if (!managed_by_apply) record_update(object, nullptr, options.manager, "", type.merge_types());
  // The built-in admission plugins, then the mutating webhooks.
  if (!type.custom) apply_admission_defaults(type.info, object);
  mutate_created(ref, object, options, name_generated, warnings);
  std::vector<FieldError> errors;
  bool allocated_ip = false;  // a Service's cluster IP, given back if the create fails
  if (!type.custom && type.group().empty() && type.resource() == "services" && !options.dry_run) {
    std::lock_guard lock(cluster_ips_mutex_);
    errors = cluster_ips_.allocate(object);
    allocated_ip = errors.empty();
  }
  if (is_crd) errors = validate_crd(object);
  try {
    if (!errors.empty())
      throw invalid(type.kind(), type.group(), meta_string(object, "name"), errors);
    validate(type, object, nullptr);
    if (options.user) {
      admission_.validate(write_admission(ref, meta_string(object, "name"), "CREATE", options),
                          object, nullptr, warnings);
    }
    if (options.dry_run) return {201, in_version(object, type), warnings};
    const ObjectStore::WriteResult written = store_.create(type.collection(), object);
    if (written.outcome == ObjectStore::Outcome::kAlreadyExists) {
      throw already_exists(type.group_resource(), meta_string(object, "name"));
    }
    object = written.object;
  } catch (const ApiError&) {
    if (allocated_ip) release_cluster_ip(type, object);
    throw;
  }
  after_created(type, object);
  return {201, in_version(object, type), warnings};
}

void ApiVerbs::admit_create(const ResourceType& type, const json& object) const {
  const std::string name = meta_string(object, "name");
  if (type.namespaced()) {
    const std::string namespace_ = meta_string(object, "namespace");
    const std::optional<json> found = store_.get({"", "namespaces"}, "", namespace_);
    if (!found) throw not_found({"", "namespaces"}, namespace_);
    if (is_terminating(*found)) {
      throw forbidden(type.group_resource(), name,
                      "unable to create new content in namespace " + namespace_ +
                          " because it is being terminated");
    }
    if (type.group().empty() && type.resource() == "pods") {
      const std::string account =
          object.value("spec", json::object()).value("serviceAccountName", "default");
      if (!store_.get({"", "serviceaccounts"}, namespace_, account)) {
        throw forbidden(type.group_resource(), name,
                        "error looking up service account " + namespace_ + "/" + account +
                            ": serviceaccount \"" + account + "\" not found");
      }
    }
  }
  if (type.custom) {
    const std::optional<json> crd =
        store_.get({"apiextensions.k8s.io", "customresourcedefinitions"}, "", type.crd_name);
    if (!crd || is_terminating(*crd)) {
      throw ApiError(405, failure_status(405, "MethodNotAllowed",
                                         "create not allowed while custom resource definition "
                                         "is terminating",
                                         json::object()));
    }
  }
}

void ApiVerbs::after_created(const ResourceType& type, const json& object) {
  if (type.group().empty() && type.resource() == "namespaces") {
    // The service account controller gives every namespace its "default" account.
    const auto accounts = builtin("", "serviceaccounts");
    const ObjectRef ref{accounts, meta_string(object, "name"), "", ""};
    const json account = {
        {"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "default"}}}};
    try {
      commit_create(ref, account, {false, "kube-controller-manager", "Ignore"}, false);
    } catch (const ApiError& error) {
      if (error.http_status() != 409) throw;
    }
  }
  if (type.resource() == "customresourcedefinitions") {
    // The apiextensions controllers accept the names and establish the CRD right after the
    // create is answered; its 201 body still shows no conditions.
    resources_.serve(object);
    const ObjectRef ref{builtin("apiextensions.k8s.io", "customresourcedefinitions"), "",
                        meta_string(object, "name"), "status"};
    mutate(
        ref,
        [](json& crd) {
          crd["status"] = established_crd_status(crd, now_rfc3339());
          return true;
        },
        "kube-apiserver");
  }
}

void ApiVerbs::after_updated(const ResourceType& type, const json& object) {
  if (type.resource() == "customresourcedefinitions" && !is_terminating(object)) {
    resources_.serve(object);
  }
}

void ApiVerbs::release_cluster_ip(const ResourceType& type, const json& object) {
  if (type.group().empty() && type.resource() == "services") {
    std::lock_guard lock(cluster_ips_mutex_);
    cluster_ips_.release(object);
  }
}

void ApiVerbs::after_removed(const ResourceType& type, const json& object) {
  release_cluster_ip(type, object);
  if (type.resource() == "customresourcedefinitions") {
    resources_.unserve(meta_string(object, "name"));
  }
}

void ApiVerbs::create_initial_objects() {
  const auto namespaces = builtin("", "namespaces");
  for (const std::string name : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    const json body = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
    commit_create({namespaces, "", "", ""}, body, {false, "kube-apiserver", "Ignore"}, false);
  }
}

}  // namespace tessel::testing
