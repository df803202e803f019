#include "tests/support/api_resources.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

namespace tessel::testing {
namespace {

using nlohmann::json;

// A custom resource's verbs, in the order kube-apiserver lists them.
const std::vector<std::string> kCustomResourceVerbs = {
    "delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"};
const std::vector<std::string> kSubresourceVerbs = {"get", "patch", "update"};

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::vector<std::string> strings(const json& list) {
  std::vector<std::string> result;
  if (!list.is_array()) return result;
  for (const json& entry : list) {
    if (entry.is_string()) result.push_back(entry.get<std::string>());
  }
  return result;
}

std::shared_ptr<const ResourceType> builtin_type(const ApiResource& info) {
  auto type = std::make_shared<ResourceType>();
  type->info = info;
  type->singular = lower(info.kind);
  type->list_kind = info.kind + "List";
  type->table =
      std::make_shared<TableConverter>(TableConverter::for_builtin(info.group, info.resource));
  return type;
}

// The resource a CRD serves in one served version, as its discovery entry says it: the CRD's
// names, the custom resource verbs, the hash of its storage version, and the status and scale
// subresources it declares.
ApiResource crd_resource(const json& crd, const json& version) {
  const json& spec = crd.at("spec");
  const json& names = spec.at("names");
  ApiResource info;
  info.group = spec.value("group", "");
  info.version = version.value("name", "");
  info.resource = names.value("plural", "");
  info.kind = names.value("kind", "");
  info.namespaced = spec.value("scope", "Namespaced") == "Namespaced";
  info.singular_name = names.value("singular", lower(info.kind));
  info.verbs = kCustomResourceVerbs;
  info.short_names = strings(names.value("shortNames", json()));
  info.categories = strings(names.value("categories", json()));
  std::string storage = info.version;
  for (const json& v : spec.value("versions", json::array())) {
    if (v.value("storage", false)) storage = v.value("name", storage);
  }
  info.storage_version_hash = storage_version_hash(info.group + "/" + storage, info.kind);
  const json declared = version.value("subresources", json::object());
  if (declared.contains("scale")) {
    info.subresources.push_back({"scale", "Scale", "autoscaling", "v1", kSubresourceVerbs});
  }
  if (declared.contains("status")) {
    info.subresources.push_back({"status", info.kind, "", "", kSubresourceVerbs});
  }
  return info;
}

// The resources a CRD serves, one per served version.
std::vector<std::shared_ptr<const ResourceType>> crd_types(const json& crd) {
  const json& spec = crd.at("spec");
  const json& names = spec.at("names");
  std::vector<std::shared_ptr<const ResourceType>> types;
  for (const json& version : spec.value("versions", json::array())) {
    if (!version.value("served", false)) continue;
    auto type = std::make_shared<ResourceType>();
    type->info = crd_resource(crd, version);
    type->custom = true;
    type->crd_name = crd.at("metadata").value("name", "");
    type->singular = type->info.singular_name;
    type->list_kind = names.value("listKind", type->info.kind + "List");
    type->categories = type->info.categories;
    type->crd_version = version;
    const json schema = version.value("schema", json::object()).value("openAPIV3Schema", json());
    if (!schema.is_null()) type->schema = std::make_shared<StructuralSchema>(schema);
    type->table = std::make_shared<TableConverter>(TableConverter::for_crd_version(version));
    types.push_back(std::move(type));
  }
  return types;
}

}  // namespace

bool ResourceType::has_generation() const {
  if (custom) return true;
  const std::string& r = resource();
  return r == "customresourcedefinitions" || r == "deployments" || r == "daemonsets" ||
         r == "poddisruptionbudgets" || r == "validatingadmissionpolicies" ||
         r == "validatingadmissionpolicybindings";
}

bool ResourceType::graceful_deletion() const { return group().empty() && resource() == "pods"; }

bool ResourceType::returns_deleted_object() const {
  return group().empty() && (resource() == "pods" || resource() == "services");
}

bool ResourceType::allow_create_on_update() const {
  if (custom) return false;
  return resource() == "events" || resource() == "leases" || resource() == "services" ||
         resource() == "serviceaccounts";
}

bool ResourceType::allow_unconditional_update() const {
  return !custom && resource() != "customresourcedefinitions";
}

const std::vector<std::string>& ResourceType::extra_field_labels() const {
  static const std::vector<std::string> kNone;
  static const std::vector<std::string> kPods = {
      "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",      "spec.serviceAccountName",
      "status.phase",  "status.podIP",       "status.nominatedNodeName"};
  static const std::vector<std::string> kCoreEvents = {
      "involvedObject.kind",       "involvedObject.namespace",
      "involvedObject.name",       "involvedObject.uid",
      "involvedObject.apiVersion", "involvedObject.resourceVersion",
      "involvedObject.fieldPath",  "reason",
      "reportingComponent",        "type"};
  static const std::vector<std::string> kNodes = {"spec.unschedulable"};
  static const std::vector<std::string> kNamespaces = {"status.phase"};
  static const std::vector<std::string> kSecrets = {"type"};
  if (custom || !group().empty()) return kNone;
  if (resource() == "pods") return kPods;
  if (resource() == "events") return kCoreEvents;
  if (resource() == "nodes") return kNodes;
  if (resource() == "namespaces") return kNamespaces;
  if (resource() == "secrets") return kSecrets;
  return kNone;
}

MergeTypes ResourceType::merge_types() const {
  return custom ? MergeTypes::for_crd_version(crd_version)
                : MergeTypes::for_kind(api_version(), kind());
}

ServedResources::ServedResources() {
  for (const ApiResource& info : served_builtin_resources()) types_.push_back(builtin_type(info));
}

std::shared_ptr<const ResourceType> ServedResources::find(const std::string& group,
                                                          const std::string& version,
                                                          const std::string& resource) const {
  std::lock_guard lock(mutex_);
  for (const auto& type : types_) {
    const ApiResource& info = type->info;
    if (info.group == group && info.version == version && info.resource == resource) return type;
  }
  return nullptr;
}

std::shared_ptr<const ResourceType> ServedResources::find_kind(const std::string& api_version,
                                                               const std::string& kind) const {
  std::lock_guard lock(mutex_);
  for (const auto& type : types_) {
    if (type->kind() == kind && type->api_version() == api_version) return type;
  }
  return nullptr;
}

std::vector<std::shared_ptr<const ResourceType>> ServedResources::all() const {
  std::lock_guard lock(mutex_);
  return types_;
}

bool ServedResources::serves_group(const std::string& group) const {
  std::lock_guard lock(mutex_);
  return std::any_of(types_.begin(), types_.end(),
                     [&](const auto& type) { return type->group() == group; });
}

bool ServedResources::serves_group_version(const std::string& group,
                                           const std::string& version) const {
  std::lock_guard lock(mutex_);
  return std::any_of(types_.begin(), types_.end(), [&](const auto& type) {
    return type->group() == group && type->info.version == version;
  });
}

void ServedResources::serve(const json& crd) {
  std::vector<std::shared_ptr<const ResourceType>> added = crd_types(crd);
  const std::string name = crd.at("metadata").value("name", "");
  std::lock_guard lock(mutex_);
  std::erase_if(types_, [&](const auto& type) { return type->crd_name == name; });
  types_.insert(types_.end(), added.begin(), added.end());
  crds_[name] = crd;
}

void ServedResources::unserve(const std::string& crd_name) {
  std::lock_guard lock(mutex_);
  std::erase_if(types_,
                [&](const auto& type) { return type->custom && type->crd_name == crd_name; });
  crds_.erase(crd_name);
}

std::vector<json> ServedResources::crds() const {
  std::lock_guard lock(mutex_);
  std::vector<json> result;
  for (const auto& [name, crd] : crds_) result.push_back(crd);
  return result;
}

std::vector<ApiResource> ServedResources::resources() const {
  std::lock_guard lock(mutex_);
  std::vector<ApiResource> out;
  for (const auto& type : types_) out.push_back(type->info);
  return out;
}

void default_crd(json& crd) {
  json& spec = crd["spec"];
  json& names = spec["names"];
  const std::string kind = names.value("kind", "");
  if (!names.contains("listKind") && !kind.empty()) names["listKind"] = kind + "List";
  if (!names.contains("singular") && !kind.empty()) names["singular"] = lower(kind);
  if (!spec.contains("conversion")) spec["conversion"] = {{"strategy", "None"}};
  json stored = json::array();
  for (const json& version : spec.value("versions", json::array())) {
    if (version.value("storage", false)) stored.push_back(version.value("name", ""));
  }
  crd["status"] = {{"conditions", nullptr},
                   {"acceptedNames", {{"plural", ""}, {"kind", ""}}},
                   {"storedVersions", stored}};
}

std::vector<FieldError> validate_crd(const json& crd) {
  std::vector<FieldError> errors;
  const json spec = crd.value("spec", json::object());
  const json names = spec.value("names", json::object());
  const std::string group = spec.value("group", "");
  const std::string plural = names.value("plural", "");
  const std::string name = crd.value("metadata", json::object()).value("name", "");
  if (group.empty()) errors.push_back({"FieldValueRequired", "spec.group", "Required value"});
  if (plural.empty()) {
    errors.push_back({"FieldValueRequired", "spec.names.plural", "Required value"});
  }
  if (names.value("kind", "").empty()) {
    errors.push_back({"FieldValueRequired", "spec.names.kind", "Required value"});
  }
  if (!group.empty() && !plural.empty() && name != plural + "." + group) {
    errors.push_back(
        {"FieldValueInvalid", "metadata.name",
         "Invalid value: \"" + name + "\": must be spec.names.plural+\".\"+spec.group"});
  }
  const std::string scope = spec.value("scope", "");
  if (scope != "Namespaced" && scope != "Cluster") {
    errors.push_back({scope.empty() ? "FieldValueRequired" : "FieldValueNotSupported", "spec.scope",
                      scope.empty() ? "Required value"
                                    : "Unsupported value: \"" + scope +
                                          "\": supported values: \"Cluster\", \"Namespaced\""});
  }
  const json versions = spec.value("versions", json::array());
  if (!versions.is_array() || versions.empty()) {
    errors.push_back({"FieldValueInvalid", "spec.versions",
                      "Invalid value: \"null\": must have exactly one version marked as storage "
                      "version"});
    return errors;
  }
  int storage = 0;
  for (std::size_t i = 0; i < versions.size(); ++i) {
    const json& version = versions[i];
    const std::string at = "spec.versions[" + std::to_string(i) + "]";
    if (version.value("storage", false)) ++storage;
    const json schema = version.value("schema", json::object()).value("openAPIV3Schema", json());
    if (schema.is_null()) {
      errors.push_back({"FieldValueRequired", at + ".schema.openAPIV3Schema",
                        "Required value: schemas are required"});
      continue;
    }
    try {
      StructuralSchema structural(schema);
      TableConverter::for_crd_version(version);
    } catch (const std::invalid_argument& error) {
      errors.push_back({"FieldValueInvalid", at + ".schema.openAPIV3Schema",
                        std::string("Invalid value: ") + error.what()});
    }
  }
  if (storage != 1) {
    errors.push_back({"FieldValueInvalid", "spec.versions",
                      "Invalid value: " + versions.dump() +
                          ": must have exactly one version marked as storage version"});
  }
  return errors;
}

json established_crd_status(const json& crd, const std::string& now) {
  json status = crd.value("status", json::object());
  status["acceptedNames"] = crd.at("spec").at("names");
  status["conditions"] = json::array({{{"type", "NamesAccepted"},
                                       {"status", "True"},
                                       {"lastTransitionTime", now},
                                       {"reason", "NoConflicts"},
                                       {"message", "no conflicts found"}},
                                      {{"type", "Established"},
                                       {"status", "True"},
                                       {"lastTransitionTime", now},
                                       {"reason", "InitialNamesAccepted"},
                                       {"message", "the initial names have been accepted"}}});
  return status;
}

}  // namespace tessel::testing
