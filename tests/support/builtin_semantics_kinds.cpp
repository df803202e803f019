// The built-in kinds other than Pod: Node, Namespace, ConfigMap, Secret, ServiceAccount, Event
// (core/v1 and events.k8s.io/v1) and Lease. Services are in builtin_semantics_service.cpp.
#include "tests/support/builtin_semantics_kinds.h"

#include <algorithm>

#include "kube/base64.h"
#include "tests/support/builtin_semantics_errors.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
namespace v = validation;

constexpr std::size_t kMaxSecretSize = 1024 * 1024;
constexpr std::size_t kReportingInstanceLengthLimit = 128;
constexpr std::size_t kActionLengthLimit = 128;
constexpr std::size_t kReasonLengthLimit = 128;
constexpr std::size_t kNoteLengthLimit = 1024;

std::string text_of(const json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_string()
             ? object[field].get<std::string>()
             : "";
}

json object_at(const json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_object() ? object[field]
                                                                                   : json::object();
}

std::string namespace_of(const json& object) {
  return text_of(object_at(object, "metadata"), "namespace");
}

// ---- Node ----

void node_decode_defaults(json& node) {
  if (!node.contains("status") || !node["status"].is_object()) return;
  json& status = node["status"];
  if (!status.contains("allocatable") && status.contains("capacity")) {
    status["allocatable"] = status["capacity"];
  }
}

void node_admission_defaults(json& node) {
  // TaintNodesByCondition: a new Node is not ready until its kubelet says so.
  if (!node.contains("spec") || !node["spec"].is_object()) node["spec"] = json::object();
  json& spec = node["spec"];
  if (!spec.contains("taints") || !spec["taints"].is_array()) spec["taints"] = json::array();
  for (const auto& t : spec["taints"]) {
    if (t.value("key", "") == "node.kubernetes.io/not-ready" &&
        t.value("effect", "") == "NoSchedule") {
      return;
    }
  }
  spec["taints"].push_back({{"key", "node.kubernetes.io/not-ready"}, {"effect", "NoSchedule"}});
}

std::vector<FieldError> validate_taints(const json& taints) {
  std::vector<FieldError> out;
  if (!taints.is_array()) return out;
  for (std::size_t i = 0; i < taints.size(); ++i) {
    const std::string path = v::index("spec.taints", i);
    const std::string key = text_of(taints[i], "key");
    for (const auto& m : v::qualified_name(key)) out.push_back(v::invalid(path + ".key", key, m));
    const std::string value = text_of(taints[i], "value");
    for (const auto& m : v::label_value(value))
      out.push_back(v::invalid(path + ".value", value, m));
    const std::string effect = text_of(taints[i], "effect");
    if (effect.empty()) {
      out.push_back(v::required(path + ".effect"));
    } else if (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
      out.push_back(v::not_supported(path + ".effect", effect,
                                     {"NoSchedule", "PreferNoSchedule", "NoExecute"}));
    }
  }
  return out;
}

std::vector<FieldError> validate_node(const json& node) {
  return validate_taints(object_at(node, "spec").value("taints", json()));
}

std::vector<FieldError> validate_node_update(const json& old_node, const json& new_node) {
  std::vector<FieldError> out = validate_node(new_node);
  const json old_cidrs = object_at(old_node, "spec").value("podCIDRs", json());
  const json new_cidrs = object_at(new_node, "spec").value("podCIDRs", json());
  if (old_cidrs.is_array() && !old_cidrs.empty() && old_cidrs != new_cidrs) {
    out.push_back(v::forbidden("spec.podCIDRs",
                               "node updates may not change podCIDR except from \"\" to valid"));
  }
  return out;
}

// ---- Namespace ----

void namespace_decode_defaults(json& ns) {
  const std::string name = text_of(object_at(ns, "metadata"), "name");
  if (name.empty()) return;
  ns["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
}

void namespace_admission_defaults(json& ns) {
  if (!ns.contains("spec") || !ns["spec"].is_object()) ns["spec"] = json::object();
  json& finalizers = ns["spec"]["finalizers"];
  if (!finalizers.is_array()) finalizers = json::array();
  if (std::find(finalizers.begin(), finalizers.end(), json("kubernetes")) == finalizers.end()) {
    finalizers.push_back("kubernetes");
  }
  ns["status"] = {{"phase", "Active"}};
}

std::vector<FieldError> validate_namespace(const json& ns) {
  std::vector<FieldError> out;
  const json finalizers = object_at(ns, "spec").value("finalizers", json::array());
  for (std::size_t i = 0; i < finalizers.size(); ++i) {
    const std::string name = finalizers[i].is_string() ? finalizers[i].get<std::string>() : "";
    const std::string path = v::index("spec.finalizers", i);
    const auto problems = v::qualified_name(name);
    for (const auto& m : problems) out.push_back(v::invalid(path, name, m));
    if (problems.empty() && name.find('/') == std::string::npos && name != "kubernetes") {
      out.push_back(v::invalid(
          path, name, "name is neither a standard finalizer name nor is it fully qualified"));
    }
  }
  return out;
}

std::vector<FieldError> validate_namespace_update(const json&, const json&) { return {}; }

// ---- ConfigMap and Secret ----

std::vector<FieldError> validate_data_keys(const json& object, const char* data, const char* other,
                                           const char* duplicate_message, std::size_t& total) {
  std::vector<FieldError> out;
  const json entries = object_at(object, data);
  const json others = object_at(object, other);
  for (const auto& [k, value] : entries.items()) {
    const std::string path = v::key(data, k);
    for (const auto& m : v::config_map_key(k)) out.push_back(v::invalid(path, k, m));
    if (others.contains(k)) out.push_back(v::invalid(path, k, duplicate_message));
    total += value.is_string() ? value.get<std::string>().size() : 0;
  }
  return out;
}

std::vector<FieldError> validate_config_map(const json& cm) {
  std::size_t total = 0;
  std::vector<FieldError> out =
      validate_data_keys(cm, "data", "binaryData", "duplicate of key present in binaryData", total);
  v::append(
      out, validate_data_keys(cm, "binaryData", "data", "duplicate of key present in data", total));
  if (total > kMaxSecretSize) out.push_back(v::too_long("", kMaxSecretSize));
  return out;
}

// ConfigMaps and Secrets marked immutable keep their data, and stay immutable.
std::vector<FieldError> validate_immutable_data(const json& old_object, const json& new_object,
                                                std::initializer_list<const char*> data_fields) {
  std::vector<FieldError> out;
  if (!old_object.value("immutable", false)) return out;
  const std::string message = "field is immutable when `immutable` is set";
  if (!new_object.value("immutable", false)) out.push_back(v::forbidden("immutable", message));
  for (const char* field : data_fields) {
    if (old_object.value(field, json()) != new_object.value(field, json())) {
      out.push_back(v::forbidden(field, message));
    }
  }
  return out;
}

std::vector<FieldError> validate_config_map_update(const json& old_cm, const json& new_cm) {
  std::vector<FieldError> out = validate_immutable_data(old_cm, new_cm, {"data", "binaryData"});
  v::append(out, validate_config_map(new_cm));
  return out;
}

// stringData is write-only: decoding merges it into data.
void secret_decode_defaults(json& secret) {
  if (secret.contains("stringData") && secret["stringData"].is_object()) {
    for (const auto& [k, value] : secret["stringData"].items()) {
      if (value.is_string())
        secret["data"][k] = tessel::kube::base64_encode(value.get<std::string>());
    }
    secret.erase("stringData");
  }
  if (text_of(secret, "type").empty()) secret["type"] = "Opaque";
}

std::size_t decoded_size(const json& value) {
  if (!value.is_string()) return 0;
  const auto decoded = tessel::kube::base64_decode(value.get<std::string>());
  return decoded ? decoded->size() : 0;
}

std::vector<FieldError> validate_secret(const json& secret) {
  std::vector<FieldError> out;
  const json data = object_at(secret, "data");
  std::size_t total = 0;
  for (const auto& [k, value] : data.items()) {
    for (const auto& m : v::config_map_key(k)) out.push_back(v::invalid(v::key("data", k), k, m));
    total += decoded_size(value);
  }
  if (total > kMaxSecretSize) out.push_back(v::too_long("data", kMaxSecretSize));
  const std::string type = text_of(secret, "type");
  const auto require = [&](const char* key) {
    if (!data.contains(key)) out.push_back(v::required(v::key("data", key)));
  };
  if (type == "kubernetes.io/tls") {
    require("tls.key");
    require("tls.crt");
  } else if (type == "kubernetes.io/dockerconfigjson") {
    require(".dockerconfigjson");
  } else if (type == "kubernetes.io/dockercfg") {
    require(".dockercfg");
  } else if (type == "kubernetes.io/ssh-auth") {
    require("ssh-privatekey");
  } else if (type == "kubernetes.io/service-account-token") {
    const json annotations = object_at(object_at(secret, "metadata"), "annotations");
    if (text_of(annotations, "kubernetes.io/service-account.name").empty()) {
      out.push_back(v::required("metadata.annotations[kubernetes.io/service-account.name]"));
    }
  }
  return out;
}

std::vector<FieldError> validate_secret_update(const json& old_secret, const json& new_secret) {
  std::vector<FieldError> out;
  if (text_of(old_secret, "type") != text_of(new_secret, "type")) {
    out.push_back(v::invalid("type", text_of(new_secret, "type"), "field is immutable"));
  }
  v::append(out, validate_immutable_data(old_secret, new_secret, {"data"}));
  v::append(out, validate_secret(new_secret));
  return out;
}

// ---- Events ----

bool zero_time(const json& object, const char* field) {
  return !object.contains(field) || object[field].is_null();
}

// legacyValidateEvent: what every Event write must satisfy. `reporting_field` names the
// reporting controller as the request's version calls it.
std::vector<FieldError> legacy_event_errors(const json& event, const std::string& involved,
                                            const std::string& event_time,
                                            const std::string& reporting_field,
                                            const std::string& reporting_controller,
                                            const std::string& message_field) {
  std::vector<FieldError> out;
  const std::string ns = namespace_of(event);
  const std::string involved_ns = text_of(object_at(event, involved.c_str()), "namespace");
  if (zero_time(event, event_time.c_str())) {
    if (involved_ns.empty() ? !ns.empty() && ns != "default" : ns != involved_ns) {
      out.push_back(
          v::invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"));
    }
  } else {
    if (involved_ns.empty() && ns != "default" && ns != "kube-system") {
      out.push_back(
          v::invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"));
    }
    if (reporting_controller.empty()) out.push_back(v::required(reporting_field));
    for (const auto& m : v::qualified_name(reporting_controller)) {
      out.push_back(v::invalid(reporting_field, reporting_controller, m));
    }
    const auto limited = [&](const char* field, const std::string& value, std::size_t limit,
                             bool required) {
      if (required && value.empty()) out.push_back(v::required(field));
      if (value.size() > limit) {
        out.push_back(
            v::invalid(field, "", "can have at most " + std::to_string(limit) + " characters"));
      }
    };
    limited("reportingInstance", text_of(event, "reportingInstance"), kReportingInstanceLengthLimit,
            true);
    limited("action", text_of(event, "action"), kActionLengthLimit, true);
    limited("reason", text_of(event, "reason"), kReasonLengthLimit, true);
    limited("message", text_of(event, message_field.c_str()), kNoteLengthLimit, false);
  }
  for (const auto& m : v::dns1123_subdomain(ns)) out.push_back(v::invalid("namespace", ns, m));
  return out;
}

std::vector<FieldError> validate_core_event(const json& event) {
  return legacy_event_errors(event, "involvedObject", "eventTime", "reportingComponent",
                             text_of(event, "reportingComponent"), "message");
}

std::vector<FieldError> validate_core_event_update(const json&, const json& new_event) {
  return validate_core_event(new_event);
}

// events.k8s.io/v1: the legacy rules plus the strict ones of the new API.
std::vector<FieldError> validate_events_v1_event(const json& event) {
  std::vector<FieldError> out =
      legacy_event_errors(event, "regarding", "eventTime", "reportingController",
                          text_of(event, "reportingController"), "note");
  if (zero_time(event, "eventTime")) out.push_back(v::required("eventTime"));
  const std::string type = text_of(event, "type");
  if (type != "Normal" && type != "Warning") {
    out.push_back(v::invalid("type", "", "has invalid value: " + type));
  }
  if (!zero_time(event, "deprecatedFirstTimestamp")) {
    out.push_back(v::invalid("firstTimestamp", "", "needs to be unset"));
  }
  if (!zero_time(event, "deprecatedLastTimestamp")) {
    out.push_back(v::invalid("lastTimestamp", "", "needs to be unset"));
  }
  if (event.value("deprecatedCount", 0) != 0)
    out.push_back(v::invalid("count", "", "needs to be unset"));
  const json source = object_at(event, "deprecatedSource");
  if (!text_of(source, "component").empty() || !text_of(source, "host").empty()) {
    out.push_back(v::invalid("source", "", "needs to be unset"));
  }
  return out;
}

std::vector<FieldError> validate_events_v1_event_update(const json& old_event,
                                                        const json& new_event) {
  std::vector<FieldError> out = validate_events_v1_event(new_event);
  for (const auto& [field, shown] : std::vector<std::pair<const char*, const char*>>{
           {"regarding", "involvedObject"},
           {"reason", "reason"},
           {"type", "type"},
           {"eventTime", "eventTime"},
           {"action", "action"},
           {"reportingController", "reportingController"},
           {"reportingInstance", "reportingInstance"}}) {
    if (old_event.value(field, json()) != new_event.value(field, json())) {
      json value = new_event.value(field, json());
      out.push_back(v::invalid(shown, value.is_object() ? json("") : value, "field is immutable"));
    }
  }
  return out;
}

// ---- Lease ----

std::vector<FieldError> validate_lease(const json& lease) {
  std::vector<FieldError> out;
  const json spec = object_at(lease, "spec");
  if (spec.contains("leaseDurationSeconds") && spec["leaseDurationSeconds"].is_number() &&
      spec["leaseDurationSeconds"].get<std::int64_t>() <= 0) {
    out.push_back(v::invalid("spec.leaseDurationSeconds", spec["leaseDurationSeconds"],
                             "must be greater than 0"));
  }
  if (spec.contains("leaseTransitions") && spec["leaseTransitions"].is_number() &&
      spec["leaseTransitions"].get<std::int64_t>() < 0) {
    out.push_back(v::invalid("spec.leaseTransitions", spec["leaseTransitions"],
                             "must be greater than or equal to 0"));
  }
  return out;
}

std::vector<FieldError> validate_lease_update(const json&, const json& new_lease) {
  return validate_lease(new_lease);
}

}  // namespace

KindRules node_rules() {
  return {v::name_is_dns1123_subdomain, node_decode_defaults, node_admission_defaults,
          validate_node, validate_node_update};
}

KindRules namespace_rules() {
  return {v::name_is_dns1123_label, namespace_decode_defaults, namespace_admission_defaults,
          validate_namespace, validate_namespace_update};
}

KindRules config_map_rules() {
  return {v::name_is_dns1123_subdomain, no_defaults, no_defaults, validate_config_map,
          validate_config_map_update};
}

KindRules secret_rules() {
  return {v::name_is_dns1123_subdomain, secret_decode_defaults, no_defaults, validate_secret,
          validate_secret_update};
}

KindRules service_account_rules() {
  return {v::name_is_dns1123_subdomain, no_defaults, no_defaults, no_errors, no_update_errors};
}

KindRules core_event_rules() {
  // core/v1 Events keep their legacy leniency: no metadata checks of their own.
  return {v::name_is_dns1123_subdomain, no_defaults, no_defaults, validate_core_event,
          validate_core_event_update,   false,       false};
}

KindRules events_v1_event_rules() {
  return {v::name_is_dns1123_subdomain, no_defaults, no_defaults, validate_events_v1_event,
          validate_events_v1_event_update};
}

KindRules lease_rules() {
  return {v::name_is_dns1123_subdomain, no_defaults, no_defaults, validate_lease,
          validate_lease_update};
}

}  // namespace tessel::testing
