// The entry points of builtin_semantics: dispatch to the kind's rules, and the metadata
// validation every kind shares (k8s.io/apimachinery's ValidateObjectMetaAccessor and
// ValidateObjectMetaAccessorUpdate, with the core group's finalizer-name check).
#include "tests/support/builtin_semantics.h"

#include <functional>
#include <set>

#include "tests/support/api_admission_config.h"
#include "tests/support/builtin_semantics_errors.h"
#include "tests/support/builtin_semantics_kinds.h"
#include "tests/support/managed_fields_merge_types.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
namespace v = validation;

constexpr std::size_t kTotalAnnotationSizeLimit = 256 * 1024;
constexpr std::size_t kMaxSubresourceNameLength = 256;
constexpr std::size_t kFieldManagerMaxLength = 128;

const std::set<std::string> kStandardFinalizers = {"kubernetes", "orphan", "foregroundDeletion"};

json meta_of(const json& object) {
  return object.is_object() ? object.value("metadata", json::object()) : json::object();
}

std::string string_at(const json& meta, const char* field) {
  return meta.contains(field) && meta[field].is_string() ? meta[field].get<std::string>() : "";
}

bool same(const json& meta_a, const json& meta_b, const char* field) {
  const json a = meta_a.value(field, json());
  const json b = meta_b.value(field, json());
  return a == b;
}

std::vector<FieldError> validate_labels(const json& labels, const std::string& field) {
  std::vector<FieldError> out;
  if (!labels.is_object()) return out;
  for (const auto& [k, value] : labels.items()) {
    for (const auto& m : v::qualified_name(k)) out.push_back(v::invalid(field, k, m));
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    for (const auto& m : v::label_value(text)) out.push_back(v::invalid(field, text, m));
  }
  return out;
}

std::vector<FieldError> validate_annotations(const json& annotations, const std::string& field) {
  std::vector<FieldError> out;
  if (!annotations.is_object()) return out;
  std::size_t total = 0;
  for (const auto& [k, value] : annotations.items()) {
    std::string lower = k;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& m : v::qualified_name(lower)) out.push_back(v::invalid(field, k, m));
    total += k.size() + (value.is_string() ? value.get<std::string>().size() : 0);
  }
  if (total > kTotalAnnotationSizeLimit)
    out.push_back(v::too_long(field, kTotalAnnotationSizeLimit));
  return out;
}

// Go's %#v of []metav1.OwnerReference, as the error prints the whole list. Go shows the
// addresses of the *bool fields, which differ on every run; a fixed one stands in for them.
std::string go_owner_references(const json& references) {
  std::string out = "[]v1.OwnerReference{";
  bool first = true;
  for (const auto& ref : references) {
    const auto text = [&](const char* f) { return v::go_value(ref.value(f, "")); };
    const auto pointer = [&](const char* f) {
      return std::string(ref.contains(f) && ref[f].is_boolean() ? "(*bool)(0xc000000000)"
                                                                : "(*bool)(nil)");
    };
    out += (first ? "" : ", ") + std::string("v1.OwnerReference{APIVersion:") + text("apiVersion") +
           ", Kind:" + text("kind") + ", Name:" + text("name") + ", UID:" + text("uid") +
           ", Controller:" + pointer("controller") +
           ", BlockOwnerDeletion:" + pointer("blockOwnerDeletion") + "}";
    first = false;
  }
  return out + "}";
}

std::vector<FieldError> validate_owner_references(const json& references,
                                                  const std::string& field) {
  std::vector<FieldError> out;
  if (!references.is_array()) return out;
  std::string first_controller;
  for (const auto& ref : references) {
    const std::string api_version = ref.value("apiVersion", "");
    const std::string version = api_version.substr(api_version.find('/') + 1);
    if (version.empty()) {
      out.push_back(v::invalid(field + ".apiVersion", api_version, "version must not be empty"));
    }
    if (ref.value("kind", "").empty()) {
      out.push_back(v::invalid(field + ".kind", ref.value("kind", ""), "kind must not be empty"));
    }
    if (ref.value("name", "").empty()) {
      out.push_back(v::invalid(field + ".name", ref.value("name", ""), "name must not be empty"));
    }
    if (ref.value("uid", "").empty()) {
      out.push_back(v::invalid(field + ".uid", ref.value("uid", ""), "uid must not be empty"));
    }
    if (ref.value("controller", false)) {
      const std::string name = ref.value("kind", "") + "/" + ref.value("name", "");
      if (first_controller.empty()) {
        first_controller = name;
      } else {
        FieldError e = v::invalid(field, "", "");
        e.message = "Invalid value: " + go_owner_references(references) +
                    ": Only one reference can have Controller set to true. Found \"true\" in "
                    "references for " +
                    first_controller + " and " + name;
        out.push_back(e);
      }
    }
  }
  return out;
}

std::vector<FieldError> validate_finalizers(const json& finalizers, const std::string& field) {
  std::vector<FieldError> out;
  if (!finalizers.is_array()) return out;
  bool orphan = false;
  bool foreground = false;
  for (const auto& f : finalizers) {
    const std::string name = f.is_string() ? f.get<std::string>() : "";
    for (const auto& m : v::qualified_name(name)) out.push_back(v::invalid(field, name, m));
    orphan |= name == "orphan";
    foreground |= name == "foregroundDeletion";
  }
  if (orphan && foreground) {
    out.push_back(v::invalid(field, finalizers,
                             "finalizer orphan and foregroundDeletion cannot be both set"));
  }
  return out;
}

// The core group's extra check: a finalizer without a '/' must be a standard one.
std::vector<FieldError> validate_kube_finalizer_names(const json& finalizers,
                                                      const std::string& field) {
  std::vector<FieldError> out;
  if (!finalizers.is_array()) return out;
  for (std::size_t i = 0; i < finalizers.size(); ++i) {
    const std::string name = finalizers[i].is_string() ? finalizers[i].get<std::string>() : "";
    const std::string path = v::index(field, i);
    const auto problems = v::qualified_name(name);
    for (const auto& m : problems) out.push_back(v::invalid(path, name, m));
    if (problems.empty() && name.find('/') == std::string::npos &&
        !kStandardFinalizers.contains(name)) {
      out.push_back(v::invalid(
          path, name, "name is neither a standard finalizer name nor is it fully qualified"));
    }
  }
  return out;
}

std::vector<FieldError> validate_managed_fields(const json& entries, const std::string& field) {
  std::vector<FieldError> out;
  if (!entries.is_array()) return out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const json& e = entries[i];
    const std::string path = v::index(field, i);
    const std::string operation = e.value("operation", "");
    if (operation != "Apply" && operation != "Update") {
      out.push_back(v::invalid(path + ".operation", operation, "must be `Apply` or `Update`"));
    }
    const std::string fields_type = e.value("fieldsType", "");
    if (!fields_type.empty() && fields_type != "FieldsV1") {
      out.push_back(v::invalid(path + ".fieldsType", fields_type, "must be `FieldsV1`"));
    }
    if (e.value("manager", "").size() > kFieldManagerMaxLength) {
      out.push_back(v::too_long(path + ".manager", kFieldManagerMaxLength));
    }
    if (e.value("subresource", "").size() > kMaxSubresourceNameLength) {
      out.push_back(v::too_long(path + ".subresource", kMaxSubresourceNameLength));
    }
  }
  return out;
}

// apimachinery's ValidateObjectMetaAccessor with the given name rule.
std::vector<FieldError> validate_meta(const json& object, bool namespaced, NameRule name_rule) {
  const json meta = meta_of(object);
  std::vector<FieldError> out;
  const std::string generate_name = string_at(meta, "generateName");
  if (!generate_name.empty()) {
    for (const auto& m : name_rule(generate_name, true)) {
      out.push_back(v::invalid("metadata.generateName", generate_name, m));
    }
  }
  const std::string name = string_at(meta, "name");
  if (name.empty()) {
    out.push_back(v::required("metadata.name", "name or generateName is required"));
  } else {
    for (const auto& m : name_rule(name, false))
      out.push_back(v::invalid("metadata.name", name, m));
  }
  const std::string ns = string_at(meta, "namespace");
  if (namespaced) {
    if (ns.empty()) {
      out.push_back(v::required("metadata.namespace"));
    } else {
      for (const auto& m : v::dns1123_label(ns))
        out.push_back(v::invalid("metadata.namespace", ns, m));
    }
  } else if (!ns.empty()) {
    out.push_back(v::forbidden("metadata.namespace", "not allowed on this type"));
  }
  if (meta.contains("generation") && meta["generation"].is_number() &&
      meta["generation"].get<std::int64_t>() < 0) {
    out.push_back(v::invalid("metadata.generation", meta["generation"],
                             "must be greater than or equal to 0"));
  }
  v::append(out, validate_labels(meta.value("labels", json()), "metadata.labels"));
  v::append(out, validate_annotations(meta.value("annotations", json()), "metadata.annotations"));
  v::append(out, validate_owner_references(meta.value("ownerReferences", json()),
                                           "metadata.ownerReferences"));
  v::append(out, validate_finalizers(meta.value("finalizers", json()), "metadata.finalizers"));
  v::append(out,
            validate_managed_fields(meta.value("managedFields", json()), "metadata.managedFields"));
  return out;
}

std::vector<FieldError> immutable(const json& old_meta, const json& new_meta, const char* field) {
  if (same(old_meta, new_meta, field)) return {};
  const json value = new_meta.value(field, json());
  json shown = value;
  if (value.is_string() &&
      (std::string(field) == "creationTimestamp" || std::string(field) == "deletionTimestamp")) {
    shown = go_time_string(value.get<std::string>());
    FieldError e = v::invalid("metadata." + std::string(field), "", "field is immutable");
    e.message = "Invalid value: " + shown.get<std::string>() + ": field is immutable";
    return {e};
  }
  if (value.is_null() && std::string(field) == "name") shown = "";
  return {v::invalid("metadata." + std::string(field), shown, "field is immutable")};
}

bool is_core_kind(const ApiResource& info) { return kind_rules(info) != nullptr; }

}  // namespace

std::vector<FieldError> no_errors(const json&) { return {}; }
std::vector<FieldError> no_update_errors(const json&, const json&) { return {}; }
void no_defaults(json&) {}

std::string go_time_string(const std::string& rfc3339) {
  std::string out = rfc3339;
  if (out.size() > 10 && out[10] == 'T') out[10] = ' ';
  if (!out.empty() && out.back() == 'Z') {
    out.pop_back();
    out += " +0000 UTC";
  }
  return out;
}

void fill_zero_fields(const ApiResource& info, json& object) {
  const json zero = MergeTypes::for_kind(info.api_version(), info.kind)
                        .empty_object(info.api_version(), info.kind);
  // Only what is absent; present values, even null, stay as the client sent them.
  std::function<void(json&, const json&)> fill = [&](json& target, const json& defaults) {
    for (const auto& [k, value] : defaults.items()) {
      if (!target.contains(k)) {
        target[k] = value;
      } else if (value.is_object() && target[k].is_object()) {
        fill(target[k], value);
      }
    }
  };
  if (object.is_object()) fill(object, zero);
}

std::vector<FieldError> validate_object_metadata(const ApiResource& info, const json& object) {
  const KindRules* rules = kind_rules(info);
  std::vector<FieldError> out = validate_meta(
      object, info.namespaced, rules != nullptr ? rules->name_rule : v::name_is_dns1123_subdomain);
  if (is_core_kind(info)) {
    v::append(out, validate_kube_finalizer_names(meta_of(object).value("finalizers", json()),
                                                 "metadata.finalizers"));
  }
  return out;
}

std::vector<FieldError> validate_object_metadata_update(const json& old_object,
                                                        const json& new_object) {
  const json old_meta = meta_of(old_object);
  const json new_meta = meta_of(new_object);
  std::vector<FieldError> out;
  if (old_meta.contains("deletionTimestamp") && !old_meta["deletionTimestamp"].is_null()) {
    std::set<std::string> old_finalizers;
    for (const auto& f : old_meta.value("finalizers", json::array())) {
      if (f.is_string()) old_finalizers.insert(f.get<std::string>());
    }
    std::set<std::string> extra;
    for (const auto& f : new_meta.value("finalizers", json::array())) {
      if (f.is_string() && !old_finalizers.contains(f.get<std::string>())) {
        extra.insert(f.get<std::string>());
      }
    }
    if (!extra.empty()) {
      out.push_back(v::forbidden(
          "metadata.finalizers",
          "no new finalizers can be added if the object is being deleted, found new finalizers " +
              v::go_value(json(std::vector<std::string>(extra.begin(), extra.end())))));
    }
  }
  if (string_at(new_meta, "resourceVersion").empty()) {
    out.push_back(v::invalid("metadata.resourceVersion", "", "must be specified for an update"));
  }
  if (new_meta.value("generation", 0) < old_meta.value("generation", 0)) {
    out.push_back(v::invalid("metadata.generation", new_meta.value("generation", 0),
                             "must not be decremented"));
  }
  for (const char* field : {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                            "deletionGracePeriodSeconds"}) {
    v::append(out, immutable(old_meta, new_meta, field));
  }
  v::append(out, validate_labels(new_meta.value("labels", json()), "metadata.labels"));
  v::append(out,
            validate_annotations(new_meta.value("annotations", json()), "metadata.annotations"));
  v::append(out, validate_owner_references(new_meta.value("ownerReferences", json()),
                                           "metadata.ownerReferences"));
  v::append(out, validate_managed_fields(new_meta.value("managedFields", json()),
                                         "metadata.managedFields"));
  return out;
}

void default_builtin(const ApiResource& info, json& object) {
  apply_decode_defaults(info, object);
  apply_admission_defaults(info, object);
}

void apply_decode_defaults(const ApiResource& info, json& object) {
  const KindRules* rules = kind_rules(info);
  if (rules == nullptr || !object.is_object()) return;
  rules->decode_defaults(object);
  fill_zero_fields(info, object);
}

void apply_admission_defaults(const ApiResource& info, json& object) {
  const KindRules* rules = kind_rules(info);
  if (rules == nullptr || !object.is_object()) return;
  rules->admission_defaults(object);
}

std::vector<FieldError> validate_builtin_create(const ApiResource& info, const json& object) {
  const KindRules* rules = kind_rules(info);
  std::vector<FieldError> out;
  if (rules != nullptr) {
    if (rules->validates_metadata_on_create) out = validate_object_metadata(info, object);
    v::append(out, rules->validate_create(object));
  }
  // kube-apiserver's generic check, run once the kind's own found nothing.
  if (out.empty()) out = validate_meta(object, info.namespaced, v::path_segment_name);
  return out;
}

std::vector<FieldError> validate_builtin_update(const ApiResource& info, const json& old_object,
                                                const json& new_object) {
  std::vector<FieldError> out = validate_meta(new_object, info.namespaced, v::path_segment_name);
  v::append(out, validate_object_metadata_update(old_object, new_object));
  const KindRules* rules = kind_rules(info);
  if (rules == nullptr) return out;
  if (rules->validates_metadata_on_update) {
    v::append(out, validate_object_metadata_update(old_object, new_object));
    v::append(out, validate_kube_finalizer_names(meta_of(new_object).value("finalizers", json()),
                                                 "metadata.finalizers"));
  }
  v::append(out, rules->validate_update(old_object, new_object));
  return out;
}

const KindRules* kind_rules(const ApiResource& info) {
  static const std::vector<std::pair<std::pair<std::string, std::string>, KindRules>> table = {
      {{"", "Pod"}, pod_rules()},
      {{"", "Node"}, node_rules()},
      {{"", "Namespace"}, namespace_rules()},
      {{"", "Service"}, service_rules()},
      {{"", "ConfigMap"}, config_map_rules()},
      {{"", "Secret"}, secret_rules()},
      {{"", "ServiceAccount"}, service_account_rules()},
      {{"", "Event"}, core_event_rules()},
      {{"events.k8s.io", "Event"}, events_v1_event_rules()},
      {{"coordination.k8s.io", "Lease"}, lease_rules()},
      {{"", "Endpoints"}, endpoints_rules()},
      {{"admissionregistration.k8s.io", "ValidatingWebhookConfiguration"},
       validating_webhook_configuration_rules()},
      {{"admissionregistration.k8s.io", "MutatingWebhookConfiguration"},
       mutating_webhook_configuration_rules()},
      {{"apps", "Deployment"}, deployment_rules()},
      {{"apps", "DaemonSet"}, daemon_set_rules()},
      {{"policy", "PodDisruptionBudget"}, pod_disruption_budget_rules()},
      {{"admissionregistration.k8s.io", "ValidatingAdmissionPolicy"},
       validating_admission_policy_rules()},
      {{"admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"},
       validating_admission_policy_binding_rules()},
      {{"rbac.authorization.k8s.io", "Role"}, role_rules()},
      {{"rbac.authorization.k8s.io", "ClusterRole"}, cluster_role_rules()},
      {{"rbac.authorization.k8s.io", "RoleBinding"}, role_binding_rules()},
      {{"rbac.authorization.k8s.io", "ClusterRoleBinding"}, cluster_role_binding_rules()},
  };
  for (const auto& [key, rules] : table) {
    if (key.first == info.group && key.second == info.kind) return &rules;
  }
  return nullptr;
}

}  // namespace tessel::testing
