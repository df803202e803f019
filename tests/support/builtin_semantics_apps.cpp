// apps/v1 Deployment and DaemonSet, policy/v1 PodDisruptionBudget: the defaults (the v1 Go
// defaults, the pod template's as a Pod's) and the validation of pkg/apis/apps and policy that
// the charts' objects meet, worded as kube-apiserver words it. Stored objects only: no
// controller makes ReplicaSets or Pods, and status stays as written (zero on create).
#include <string>
#include <vector>

#include "tests/support/api_admission_config.h"
#include "tests/support/builtin_semantics_errors.h"
#include "tests/support/builtin_semantics_kinds.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
namespace v = validation;

constexpr std::int64_t kDefaultRevisionHistoryLimit = 10;
constexpr std::int64_t kDefaultProgressDeadlineSeconds = 600;

json& object_field(json& object, const char* field) {
  if (!object.contains(field) || !object[field].is_object()) object[field] = json::object();
  return object[field];
}

void set_default(json& object, const char* field, const json& value) {
  if (!object.contains(field) || object[field].is_null()) object[field] = value;
}

const json& field_of(const json& object, const char* field) {
  static const json kNull;
  return object.is_object() && object.contains(field) ? object[field] : kNull;
}

// The pod template's spec gets a Pod's defaults; its metadata a creationTimestamp of null.
void default_template(json& spec) {
  json& pod_template = object_field(spec, "template");
  json pod = {
      {"spec", field_of(pod_template, "spec").is_object() ? pod_template["spec"] : json::object()}};
  pod_rules().decode_defaults(pod);
  pod_template["spec"] = pod["spec"];
  set_default(object_field(pod_template, "metadata"), "creationTimestamp", nullptr);
}

// A Pod's own validation of the template's spec, its fields named under spec.template.
std::vector<FieldError> validate_template(const json& spec) {
  const json pod_template = field_of(spec, "template");
  std::vector<FieldError> out =
      pod_rules().validate_create({{"spec", field_of(pod_template, "spec")}});
  for (FieldError& error : out) {
    if (error.field.rfind("spec.", 0) == 0) error.field = "spec.template." + error.field;
    if (error.field == "spec") error.field = "spec.template.spec";
  }
  const json& policy = field_of(field_of(pod_template, "spec"), "restartPolicy");
  const std::string restart = policy.is_string() ? policy.get<std::string>() : "";
  if (restart != "Always") {
    out.push_back(v::not_supported("spec.template.spec.restartPolicy", restart, {"Always"}));
  }
  return out;
}

// Go's %#v of a map[string]string, keys sorted: map[string]string{"a":"b", "c":"d"}.
std::string go_string_map(const json& map) {
  std::string out;
  if (map.is_object()) {
    for (const auto& [key, value] : map.items()) {
      out += (out.empty() ? "" : ", ") + json(key).dump() + ":" +
             (value.is_string() ? value.dump() : json("").dump());
    }
  }
  return "map[string]string{" + out + "}";
}

// The selector is required, not empty, and selects the template's labels.
std::vector<FieldError> validate_selector(const json& spec, const char* kind) {
  std::vector<FieldError> out;
  const json& selector = field_of(spec, "selector");
  if (!selector.is_object()) {
    out.push_back(v::required("spec.selector"));
    return out;
  }
  v::append(out, validate_label_selector(selector, "spec.selector"));
  const json& match_labels = field_of(selector, "matchLabels");
  const bool empty =
      (!match_labels.is_object() || match_labels.empty()) &&
      (!field_of(selector, "matchExpressions").is_array() || selector["matchExpressions"].empty());
  if (empty) {
    out.push_back(
        v::invalid("spec.selector", "", std::string("empty selector is invalid for ") + kind));
    return out;
  }
  const json& labels = field_of(field_of(field_of(spec, "template"), "metadata"), "labels");
  bool selects = true;
  if (match_labels.is_object()) {
    for (const auto& [key, value] : match_labels.items()) {
      if (!labels.is_object() || !labels.contains(key) || labels[key] != value) selects = false;
    }
  }
  if (!selects) {
    out.push_back({"FieldValueInvalid", "spec.template.metadata.labels",
                   "Invalid value: " + go_string_map(labels) +
                       ": `selector` does not match template `labels`"});
  }
  return out;
}

std::vector<FieldError> validate_non_negative(const json& spec, const char* field,
                                              const std::string& path) {
  const json& value = field_of(spec, field);
  if (value.is_number_integer() && value.get<std::int64_t>() < 0) {
    return {v::invalid(path, value, "must be greater than or equal to 0")};
  }
  return {};
}

std::vector<FieldError> validate_selector_unchanged(const json& old_object,
                                                    const json& new_object) {
  const json& old_selector = field_of(field_of(old_object, "spec"), "selector");
  const json& new_selector = field_of(field_of(new_object, "spec"), "selector");
  if (old_selector == new_selector) return {};
  return {{"FieldValueInvalid", "spec.selector",
           "Invalid value: " + v::go_value(new_selector) + ": field is immutable"}};
}

// ---- Deployment ----

void deployment_defaults(json& deployment) {
  json& spec = object_field(deployment, "spec");
  set_default(spec, "replicas", 1);
  json& strategy = object_field(spec, "strategy");
  set_default(strategy, "type", "RollingUpdate");
  if (strategy["type"] == "RollingUpdate") {
    json& rolling = object_field(strategy, "rollingUpdate");
    set_default(rolling, "maxUnavailable", "25%");
    set_default(rolling, "maxSurge", "25%");
  }
  set_default(spec, "revisionHistoryLimit", kDefaultRevisionHistoryLimit);
  set_default(spec, "progressDeadlineSeconds", kDefaultProgressDeadlineSeconds);
  default_template(spec);
}

// The create strategy starts every Deployment and DaemonSet with an empty status.
void clear_status(json& object) { object["status"] = json::object(); }

std::vector<FieldError> validate_deployment(const json& deployment) {
  const json spec = field_of(deployment, "spec");
  std::vector<FieldError> out = validate_non_negative(spec, "replicas", "spec.replicas");
  v::append(out, validate_selector(spec, "deployment"));
  v::append(out, validate_template(spec));
  const std::string type = field_of(field_of(spec, "strategy"), "type").is_string()
                               ? spec["strategy"]["type"].get<std::string>()
                               : "";
  if (type != "Recreate" && type != "RollingUpdate") {
    out.push_back(v::not_supported("spec.strategy.type", type, {"Recreate", "RollingUpdate"}));
  }
  v::append(out, validate_non_negative(spec, "revisionHistoryLimit", "spec.revisionHistoryLimit"));
  v::append(out, validate_non_negative(spec, "minReadySeconds", "spec.minReadySeconds"));
  return out;
}

std::vector<FieldError> validate_deployment_update(const json& old_deployment,
                                                   const json& deployment) {
  std::vector<FieldError> out = validate_deployment(deployment);
  v::append(out, validate_selector_unchanged(old_deployment, deployment));
  return out;
}

// ---- DaemonSet ----

void daemon_set_defaults(json& daemon_set) {
  json& spec = object_field(daemon_set, "spec");
  json& strategy = object_field(spec, "updateStrategy");
  set_default(strategy, "type", "RollingUpdate");
  if (strategy["type"] == "RollingUpdate") {
    json& rolling = object_field(strategy, "rollingUpdate");
    set_default(rolling, "maxUnavailable", 1);
    set_default(rolling, "maxSurge", 0);
  }
  set_default(spec, "revisionHistoryLimit", kDefaultRevisionHistoryLimit);
  default_template(spec);
}

void daemon_set_admission_defaults(json& daemon_set) {
  daemon_set["status"] = {{"currentNumberScheduled", 0},
                          {"numberMisscheduled", 0},
                          {"desiredNumberScheduled", 0},
                          {"numberReady", 0}};
}

std::vector<FieldError> validate_daemon_set(const json& daemon_set) {
  const json spec = field_of(daemon_set, "spec");
  std::vector<FieldError> out = validate_selector(spec, "daemonset");
  v::append(out, validate_template(spec));
  const json& type = field_of(field_of(spec, "updateStrategy"), "type");
  const std::string strategy = type.is_string() ? type.get<std::string>() : "";
  if (strategy != "OnDelete" && strategy != "RollingUpdate") {
    out.push_back(
        v::not_supported("spec.updateStrategy.type", strategy, {"OnDelete", "RollingUpdate"}));
  }
  return out;
}

std::vector<FieldError> validate_daemon_set_update(const json& old_daemon_set,
                                                   const json& daemon_set) {
  std::vector<FieldError> out = validate_daemon_set(daemon_set);
  v::append(out, validate_selector_unchanged(old_daemon_set, daemon_set));
  return out;
}

// ---- PodDisruptionBudget ----

void pod_disruption_budget_admission_defaults(json& budget) {
  budget["status"] = {
      {"disruptionsAllowed", 0}, {"currentHealthy", 0}, {"desiredHealthy", 0}, {"expectedPods", 0}};
}

// An IntOrString that is a count (>= 0) or a percentage (0%..100%).
std::vector<FieldError> validate_int_or_percent(const json& value, const std::string& path) {
  if (value.is_null()) return {};
  if (value.is_number_integer()) {
    if (value.get<std::int64_t>() < 0) {
      return {v::invalid(path, value, "must be greater than or equal to 0")};
    }
    return {};
  }
  const std::string text = value.is_string() ? value.get<std::string>() : "";
  const bool percent = text.size() > 1 && text.back() == '%' &&
                       text.find_first_not_of("0123456789") == text.size() - 1;
  if (!percent) {
    return {v::invalid(path, value,
                       "a valid percent string must be a numeric string followed by "
                       "an ending '%' (e.g. '1%',  or '93%', regex used for "
                       "validation is '[0-9]+%')")};
  }
  if (std::stoll(text.substr(0, text.size() - 1)) > 100) {
    return {v::invalid(path, value, "must not be greater than 100%")};
  }
  return {};
}

std::vector<FieldError> validate_pod_disruption_budget(const json& budget) {
  const json spec = field_of(budget, "spec");
  std::vector<FieldError> out;
  const json& min_available = field_of(spec, "minAvailable");
  const json& max_unavailable = field_of(spec, "maxUnavailable");
  if (!min_available.is_null() && !max_unavailable.is_null()) {
    out.push_back(v::invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"));
  }
  v::append(out, validate_int_or_percent(min_available, "spec.minAvailable"));
  v::append(out, validate_int_or_percent(max_unavailable, "spec.maxUnavailable"));
  if (field_of(spec, "selector").is_object()) {
    v::append(out, validate_label_selector(spec["selector"], "spec.selector"));
  }
  return out;
}

std::vector<FieldError> validate_pod_disruption_budget_update(const json&, const json& budget) {
  return validate_pod_disruption_budget(budget);
}

}  // namespace

KindRules deployment_rules() {
  return {v::name_is_dns1123_subdomain, deployment_defaults, clear_status, validate_deployment,
          validate_deployment_update};
}

KindRules daemon_set_rules() {
  return {v::name_is_dns1123_subdomain, daemon_set_defaults, daemon_set_admission_defaults,
          validate_daemon_set, validate_daemon_set_update};
}

KindRules pod_disruption_budget_rules() {
  return {v::name_is_dns1123_subdomain, no_defaults, pod_disruption_budget_admission_defaults,
          validate_pod_disruption_budget, validate_pod_disruption_budget_update};
}

}  // namespace tessel::testing
