// delete and deletecollection (declared in api_verbs.h), following kube-apiserver's generic
// registry: graceful deletion (Pods), finalizers, the garbage collector's orphan and
// foregroundDeletion finalizers, and the Namespace and CustomResourceDefinition deletions that
// only mark the object for their controllers.
#include <algorithm>
#include <chrono>
#include <ctime>

#include "tests/support/api_errors.h"
#include "tests/support/api_object_meta.h"
#include "tests/support/api_object_rules.h"
#include "tests/support/api_verbs.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

constexpr const char* kOrphanFinalizer = "orphan";
constexpr const char* kForegroundFinalizer = "foregroundDeletion";
constexpr const char* kCrdCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io";

bool is_immortal_namespace(const std::string& name) {
  return name == "default" || name == "kube-system" || name == "kube-public";
}

// The DeleteOptions fields an admission webhook is shown.
json delete_options(const DeleteOptions& options) {
  json fields = json::object();
  if (options.grace_period_seconds) fields["gracePeriodSeconds"] = *options.grace_period_seconds;
  if (!options.propagation_policy.empty()) fields["propagationPolicy"] = options.propagation_policy;
  if (options.orphan_dependents) fields["orphanDependents"] = *options.orphan_dependents;
  if (!options.precondition_uid.empty()) fields["preconditions"]["uid"] = options.precondition_uid;
  if (!options.precondition_resource_version.empty()) {
    fields["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  return fields;
}

std::chrono::system_clock::time_point parse_time(const std::string& text) {
  std::tm parts{};
  if (!strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &parts))
    return std::chrono::system_clock::now();
  return std::chrono::system_clock::from_time_t(timegm(&parts));
}

std::string time_after(std::chrono::system_clock::time_point start, std::int64_t seconds) {
  return rfc3339(start + std::chrono::seconds(seconds));
}

// The finalizers the garbage collector needs for this delete (deletionFinalizersForGarbage-
// Collection): orphan or foregroundDeletion as the options or the object's finalizers say.
// nullopt when they are already right.
std::optional<std::vector<std::string>> gc_finalizers(const json& object,
                                                      const DeleteOptions& options) {
  const std::vector<std::string> current = finalizers_of(object);
  bool orphan = false;
  bool foreground = false;
  if (options.orphan_dependents) {
    orphan = *options.orphan_dependents;
  } else if (!options.propagation_policy.empty()) {
    orphan = options.propagation_policy == "Orphan";
    foreground = options.propagation_policy == "Foreground";
  } else {
    orphan = has_finalizer(object, kOrphanFinalizer);
    foreground = !orphan && has_finalizer(object, kForegroundFinalizer);
  }
  std::vector<std::string> wanted;
  for (const std::string& finalizer : current) {
    if (finalizer != kOrphanFinalizer && finalizer != kForegroundFinalizer) {
      wanted.push_back(finalizer);
    }
  }
  if (orphan) wanted.push_back(kOrphanFinalizer);
  if (foreground) wanted.push_back(kForegroundFinalizer);
  std::vector<std::string> sorted_current = current;
  std::vector<std::string> sorted_wanted = wanted;
  std::sort(sorted_current.begin(), sorted_current.end());
  std::sort(sorted_wanted.begin(), sorted_wanted.end());
  if (sorted_current == sorted_wanted) return std::nullopt;
  return wanted;
}

// markAsDeleting: deletionTimestamp now (unless earlier), grace period 0, generation + 1 on
// the first mark.
void mark_as_deleting(json& object) {
  json& metadata = object["metadata"];
  const auto now = std::chrono::system_clock::now();
  if (!metadata.contains("deletionTimestamp") && metadata.value("generation", 0) > 0) {
    metadata["generation"] = metadata["generation"].get<std::int64_t>() + 1;
  }
  if (!metadata.contains("deletionTimestamp") ||
      parse_time(metadata["deletionTimestamp"].get<std::string>()) > now) {
    metadata["deletionTimestamp"] = rfc3339(now);
  }
  metadata["deletionGracePeriodSeconds"] = 0;
}

}  // namespace

DeleteOptions parse_delete_options(const RequestOptions& query, const std::string& body) {
  DeleteOptions options;
  options.dry_run = query.dry_run;
  options.grace_period_seconds = query.grace_period_seconds;
  options.propagation_policy = query.propagation_policy;
  options.orphan_dependents = query.orphan_dependents;
  if (!body.empty()) {
    const json parsed = json::parse(body, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object() ||
        (parsed.contains("kind") && parsed["kind"] != "DeleteOptions")) {
      throw bad_request("the body of the request is not a DeleteOptions object");
    }
    if (parsed.contains("gracePeriodSeconds") && parsed["gracePeriodSeconds"].is_number_integer()) {
      options.grace_period_seconds = parsed["gracePeriodSeconds"].get<std::int64_t>();
    }
    if (parsed.contains("propagationPolicy") && parsed["propagationPolicy"].is_string()) {
      options.propagation_policy = parsed["propagationPolicy"].get<std::string>();
    }
    if (parsed.contains("orphanDependents") && parsed["orphanDependents"].is_boolean()) {
      options.orphan_dependents = parsed["orphanDependents"].get<bool>();
    }
    const json preconditions = parsed.value("preconditions", json::object());
    if (preconditions.is_object()) {
      options.precondition_uid = preconditions.value("uid", "");
      options.precondition_resource_version = preconditions.value("resourceVersion", "");
    }
    const json dry_run = parsed.value("dryRun", json::array());
    if (dry_run.is_array() && !dry_run.empty()) options.dry_run = true;
  }
  const std::string& policy = options.propagation_policy;
  if (!policy.empty() && policy != "Foreground" && policy != "Background" && policy != "Orphan") {
    throw invalid("DeleteOptions", "meta.k8s.io", "",
                  {{"FieldValueNotSupported", "propagationPolicy",
                    "Unsupported value: \"" + policy +
                        "\": supported values: \"Foreground\", \"Background\", \"Orphan\", "
                        "\"nil\""}});
  }
  if (options.orphan_dependents && !policy.empty()) {
    throw invalid("DeleteOptions", "meta.k8s.io", "",
                  {{"FieldValueInvalid", "propagationPolicy",
                    "Invalid value: \"" + policy +
                        "\": orphanDependents and deletionPropagation cannot be both set"}});
  }
  return options;
}

VerbResult ApiVerbs::remove(const ObjectRef& ref, const DeleteOptions& options) {
  const ResourceType& type = *ref.type;
  if (type.group().empty() && type.resource() == "namespaces" && is_immortal_namespace(ref.name)) {
    throw forbidden(type.group_resource(), ref.name, "this namespace may not be deleted");
  }
  while (true) {
    const std::optional<json> current = store_.get(type.collection(), ref.namespace_, ref.name);
    if (!current) throw not_found(type.group_resource(), ref.name);
    if (!options.precondition_uid.empty() &&
        options.precondition_uid != meta_string(*current, "uid")) {
      throw conflict_with_message(
          type.group_resource(), ref.name,
          "Precondition failed: UID in precondition: " + options.precondition_uid +
              ", UID in object meta: " + meta_string(*current, "uid"));
    }
    if (!options.precondition_resource_version.empty() &&
        options.precondition_resource_version != meta_string(*current, "resourceVersion")) {
      throw conflict_with_message(
          type.group_resource(), ref.name,
          "Precondition failed: ResourceVersion in precondition: " +
              options.precondition_resource_version +
              ", ResourceVersion in object meta: " + meta_string(*current, "resourceVersion"));
    }
    std::vector<std::string> warnings;
    if (options.user) {
      // Mutating webhooks see neither object on DELETE; validating ones see the stored one.
      const AdmissionRequest request = admission_request(ref, ref.name, "DELETE", *options.user,
                                                         options.dry_run, delete_options(options));
      json none;
      admission_.mutate(request, none, nullptr, warnings);
      admission_.validate(request, nullptr, *current, warnings);
    }
    if (std::optional<VerbResult> result = try_remove(ref, *current, options)) {
      result->warnings.insert(result->warnings.end(), warnings.begin(), warnings.end());
      return *result;
    }
  }
}

std::optional<VerbResult> ApiVerbs::try_remove(const ObjectRef& ref, const json& current,
                                               const DeleteOptions& options) {
  const ResourceType& type = *ref.type;
  const std::string version = meta_string(current, "resourceVersion");
  auto store_marked = [&](const json& marked) -> std::optional<VerbResult> {
    if (options.dry_run || marked == current) return VerbResult{200, in_version(marked, type), {}};
    const ObjectStore::WriteResult written = store_.update(type.collection(), marked, version);
    if (written.outcome != ObjectStore::Outcome::kOk) return std::nullopt;
    return VerbResult{200, in_version(written.object, type), {}};
  };
  const bool is_namespace = type.group().empty() && type.resource() == "namespaces";
  const bool is_crd = type.resource() == "customresourcedefinitions";
  if ((is_namespace || is_crd) && !is_terminating(current)) {
    // The first delete only marks the object; the namespace controller (or the CRD finalizer)
    // empties it and then removes it.
    json marked = current;
    marked["metadata"]["deletionTimestamp"] = now_rfc3339();
    if (is_namespace) {
      marked["status"]["phase"] = "Terminating";
    } else {
      add_finalizer(marked, kCrdCleanupFinalizer);
      json& conditions = marked["status"]["conditions"];
      if (!conditions.is_array()) conditions = json::array();
      json kept = json::array();
      for (const json& condition : conditions) {
        if (condition.value("type", "") != "Terminating") kept.push_back(condition);
      }
      conditions = kept;
      conditions.push_back({{"type", "Terminating"},
                            {"status", "True"},
                            {"lastTransitionTime", now_rfc3339()},
                            {"reason", "InstanceDeletionPending"},
                            {"message",
                             "CustomResourceDefinition marked for deletion; CustomResource "
                             "deletion will begin soon"}});
    }
    return store_marked(marked);
  }
  if (is_namespace &&
      !current.value("spec", json::object()).value("finalizers", json::array()).empty()) {
    return VerbResult{200, in_version(current, type), {}};
  }

  // rest.BeforeDelete: graceful deletion of Pods.
  json object = current;
  json& metadata = object["metadata"];
  bool graceful = false;
  std::int64_t grace = 0;
  if (is_terminating(current)) {
    const std::int64_t existing = metadata.value("deletionGracePeriodSeconds", std::int64_t{0});
    if (existing > 0) {
      if (!options.grace_period_seconds || *options.grace_period_seconds >= existing) {
        return VerbResult{200, in_version(current, type), {}};  // graceful deletion pending
      }
      grace = *options.grace_period_seconds;
      const auto requested_at = parse_time(metadata["deletionTimestamp"].get<std::string>()) -
                                std::chrono::seconds(existing);
      metadata["deletionTimestamp"] = time_after(requested_at, grace);
      metadata["deletionGracePeriodSeconds"] = grace;
      graceful = true;
    }
  } else if (type.graceful_deletion()) {
    const json spec = current.value("spec", json::object());
    const std::string phase = current.value("status", json::object()).value("phase", "");
    grace = options.grace_period_seconds.value_or(
        spec.value("terminationGracePeriodSeconds", std::int64_t{0}));
    if (spec.value("nodeName", "").empty() || phase == "Failed" || phase == "Succeeded") grace = 0;
    metadata["deletionTimestamp"] = time_after(std::chrono::system_clock::now(), grace);
    metadata["deletionGracePeriodSeconds"] = grace;
    if (metadata.value("generation", 0) > 0) {
      metadata["generation"] = metadata["generation"].get<std::int64_t>() + 1;
    }
    graceful = true;
  }

  const std::optional<std::vector<std::string>> finalizers = gc_finalizers(object, options);
  if (finalizers) {
    if (finalizers->empty()) {
      metadata.erase("finalizers");
    } else {
      metadata["finalizers"] = *finalizers;
    }
  }
  const bool pending_finalizers = !finalizers_of(object).empty();
  std::string remove_version = version;
  if (graceful || pending_finalizers || finalizers) {
    if (!graceful && pending_finalizers) mark_as_deleting(object);
    if (graceful || pending_finalizers) {
      if (options.dry_run) return VerbResult{200, in_version(object, type), {}};
      if (object != current) {
        const ObjectStore::WriteResult written = store_.update(type.collection(), object, version);
        if (written.outcome != ObjectStore::Outcome::kOk) return std::nullopt;
        object = written.object;
        remove_version = meta_string(object, "resourceVersion");
      }
      if (pending_finalizers || grace > 0) return VerbResult{200, in_version(object, type), {}};
    }
  }
  if (options.dry_run) return removed_result(type, object);
  const ObjectStore::WriteResult removed =
      store_.remove(type.collection(), ref.namespace_, ref.name, remove_version);
  if (removed.outcome == ObjectStore::Outcome::kNotFound && graceful) {
    // A graceless delete of a pod marks it first, so a component watching it (the kubelet's
    // own final delete) may remove it before this request does. kube-apiserver answers the
    // request with the last state it wrote instead of NotFound (registry/store.go,
    // updateForGracefulDeletionAndFinalizers: kubernetes/kubernetes#19403); the remover ran
    // the removal's hooks.
    return removed_result(type, object);
  }
  if (removed.outcome != ObjectStore::Outcome::kOk) return std::nullopt;
  after_removed(type, removed.object);
  return removed_result(type, removed.object);
}

VerbResult ApiVerbs::removed_result(const ResourceType& type, const json& last) const {
  if (type.returns_deleted_object()) return {200, in_version(last, type), {}};
  return {
      200,
      success_status(type.group_resource(), meta_string(last, "name"), meta_string(last, "uid")),
      {}};
}

VerbResult ApiVerbs::remove_collection(const ObjectRef& collection, const RequestOptions& query,
                                       const DeleteOptions& options) {
  const ResourceType& type = *collection.type;
  RequestOptions selection;
  selection.label_selector = query.label_selector;
  selection.field_selector = query.field_selector;
  const ListResult listed = list(collection, selection);
  json items = json::array();
  for (const json& item : listed.items) {
    const ObjectRef ref{collection.type, meta_string(item, "namespace"), meta_string(item, "name"),
                        ""};
    try {
      const VerbResult result = remove(ref, options);
      items.push_back(result.body.value("kind", "") == "Status" ? item : result.body);
    } catch (const ApiError& error) {
      if (error.http_status() != 404) throw;
    }
  }
  ListResult deleted = listed;
  deleted.items.clear();
  for (const json& item : items) deleted.items.push_back(item);
  deleted.resource_version = store_.current_resource_version();
  return {200, list_body(type, deleted), {}};
}

}  // namespace tessel::testing
