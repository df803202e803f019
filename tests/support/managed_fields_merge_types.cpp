#include "tests/support/managed_fields_merge_types.h"

#include <sstream>
#include <utility>

namespace tessel::testing {
namespace {

using json = nlohmann::json;
using ListType = MergeTypes::ListType;
using Paths = std::vector<std::vector<std::string>>;

// Splits "spec.containers[].ports" into {"spec", "containers", "[]", "ports"}.
std::vector<std::string> segments(const std::string& pattern) {
  std::vector<std::string> out;
  std::stringstream in(pattern);
  std::string part;
  while (std::getline(in, part, '.')) {
    int lists = 0;
    while (part.ends_with("[]")) {
      part.resize(part.size() - 2);
      ++lists;
    }
    if (!part.empty()) out.push_back(part);
    for (int i = 0; i < lists; ++i) out.push_back("[]");
  }
  return out;
}

bool matches(const std::string& declared, const std::string& actual) {
  const auto d = segments(declared);
  const auto a = segments(actual);
  if (d.size() != a.size()) return false;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] != a[i] && !(d[i] == "*" && a[i] != "[]")) return false;
  }
  return true;
}

MergeTypes::ListRule keyed(std::vector<std::string> keys, json key_defaults = json::object()) {
  return {ListType::kMap, std::move(keys), std::move(key_defaults)};
}

const MergeTypes::ListRule kSet{ListType::kSet, {}, json::object()};

// What every kind shares: ObjectMeta.
void add_object_meta(MergeTypes& types) {
  types.set_list("metadata.finalizers", kSet);
  types.set_list("metadata.ownerReferences", keyed({"uid"}));
  types.set_atomic_map("metadata.ownerReferences[]");
}

json zero_meta() { return json{{"creationTimestamp", nullptr}}; }

void add_container_lists(MergeTypes& types, const std::string& containers) {
  types.set_list(containers, keyed({"name"}));
  types.set_list(containers + "[].ports",
                 keyed({"containerPort", "protocol"}, {{"protocol", "TCP"}}));
  types.set_list(containers + "[].env", keyed({"name"}));
  types.set_list(containers + "[].volumeMounts", keyed({"mountPath"}));
  types.set_list(containers + "[].volumeDevices", keyed({"devicePath"}));
  for (const char* selector : {"configMapKeyRef", "secretKeyRef", "fieldRef", "resourceFieldRef"}) {
    types.set_atomic_map(containers + "[].env[].valueFrom." + selector);
  }
}

// A PodSpec's lists at `spec` ("spec" for a Pod, "spec.template.spec" for a Deployment's).
void add_pod_spec_lists(MergeTypes& types, const std::string& spec) {
  for (const char* c : {".containers", ".initContainers", ".ephemeralContainers"}) {
    add_container_lists(types, spec + c);
  }
  types.set_list(spec + ".volumes", keyed({"name"}));
  types.set_list(spec + ".imagePullSecrets", keyed({"name"}));
  types.set_atomic_map(spec + ".imagePullSecrets[]");
  types.set_list(spec + ".hostAliases", keyed({"ip"}));
  types.set_list(spec + ".topologySpreadConstraints", keyed({"topologyKey", "whenUnsatisfiable"}));
  types.set_list(spec + ".schedulingGates", keyed({"name"}));
  types.set_list(spec + ".resourceClaims", keyed({"name"}));
}

MergeTypes pod_types() {
  MergeTypes types;
  add_object_meta(types);
  add_pod_spec_lists(types, "spec");
  types.set_list("status.conditions", keyed({"type"}));
  types.set_list("status.podIPs", keyed({"ip"}));
  types.set_ignored("", {{"status"}});
  types.set_ignored("status",
                    {{"spec"}, {"metadata", "deletionTimestamp"}, {"metadata", "ownerReferences"}});
  types.set_zero_value(
      {{"metadata", zero_meta()}, {"spec", {{"containers", nullptr}}}, {"status", json::object()}});
  return types;
}

MergeTypes node_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_list("spec.podCIDRs", kSet);
  types.set_list("status.addresses", keyed({"type"}));
  types.set_list("status.conditions", keyed({"type"}));
  types.set_ignored("", {{"status"}});
  types.set_ignored("status", {{"spec"}});
  json node_info = json::object();
  for (const char* field :
       {"machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
        "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture"}) {
    node_info[field] = "";
  }
  types.set_zero_value(
      {{"metadata", zero_meta()},
       {"spec", json::object()},
       {"status",
        {{"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 0}}}}}, {"nodeInfo", node_info}}}});
  return types;
}

MergeTypes namespace_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_list("status.conditions", keyed({"type"}));
  types.set_ignored("", {{"status"}});
  types.set_ignored("status", {{"spec"}});
  types.set_ignored("finalize", {{"status"}});
  types.set_zero_value(
      {{"metadata", zero_meta()}, {"spec", json::object()}, {"status", json::object()}});
  return types;
}

MergeTypes service_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_list("spec.ports", keyed({"port", "protocol"}, {{"protocol", "TCP"}}));
  types.set_atomic_map("spec.selector");
  types.set_list("status.conditions", keyed({"type"}));
  types.set_ignored("", {{"status"}});
  types.set_ignored("status", {{"spec"}});
  types.set_zero_value({{"metadata", zero_meta()},
                        {"spec", json::object()},
                        {"status", {{"loadBalancer", json::object()}}}});
  return types;
}

MergeTypes service_account_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_list("secrets", keyed({"name"}));
  types.set_atomic_map("secrets[]");
  types.set_zero_value({{"metadata", zero_meta()}});
  return types;
}

MergeTypes core_event_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_atomic_map("involvedObject");
  types.set_atomic_map("related");
  types.set_zero_value({{"metadata", zero_meta()},
                        {"involvedObject", json::object()},
                        {"source", json::object()},
                        {"firstTimestamp", nullptr},
                        {"lastTimestamp", nullptr},
                        {"eventTime", nullptr},
                        {"reportingComponent", ""},
                        {"reportingInstance", ""}});
  return types;
}

MergeTypes events_v1_event_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_atomic_map("regarding");
  types.set_atomic_map("related");
  types.set_zero_value({{"metadata", zero_meta()},
                        {"eventTime", nullptr},
                        {"regarding", json::object()},
                        {"deprecatedSource", json::object()},
                        {"deprecatedFirstTimestamp", nullptr},
                        {"deprecatedLastTimestamp", nullptr}});
  return types;
}

MergeTypes crd_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_list("status.conditions", keyed({"type"}));
  types.set_ignored("", {{"status"}});
  types.set_ignored("status", {{"spec"}});
  const json names = {{"plural", ""}, {"kind", ""}};
  types.set_zero_value(
      {{"metadata", zero_meta()},
       {"spec", {{"group", ""}, {"names", names}, {"scope", ""}, {"versions", nullptr}}},
       {"status",
        {{"conditions", nullptr}, {"acceptedNames", names}, {"storedVersions", nullptr}}}});
  return types;
}

MergeTypes metadata_only_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_zero_value({{"metadata", zero_meta()}});
  return types;
}

MergeTypes lease_types() {
  MergeTypes types = metadata_only_types();
  types.set_zero_value({{"metadata", zero_meta()}, {"spec", json::object()}});
  return types;
}

// Deployments and DaemonSets: the pod template's lists, an atomic selector, a status
// subresource.
MergeTypes workload_types() {
  MergeTypes types;
  add_object_meta(types);
  add_pod_spec_lists(types, "spec.template.spec");
  types.set_list("spec.template.metadata.finalizers", kSet);
  types.set_atomic_map("spec.selector");
  types.set_list("status.conditions", keyed({"type"}));
  types.set_ignored("", {{"status"}});
  types.set_ignored("status", {{"spec"}});
  types.set_zero_value(
      {{"metadata", zero_meta()},
       {"spec",
        {{"selector", nullptr},
         {"template", {{"metadata", zero_meta()}, {"spec", {{"containers", nullptr}}}}},
         {"strategy", json::object()}}},
       {"status", json::object()}});
  return types;
}

MergeTypes daemon_set_types() {
  MergeTypes types = workload_types();
  types.set_zero_value(
      {{"metadata", zero_meta()},
       {"spec",
        {{"selector", nullptr},
         {"template", {{"metadata", zero_meta()}, {"spec", {{"containers", nullptr}}}}},
         {"updateStrategy", json::object()}}},
       {"status",
        {{"currentNumberScheduled", 0},
         {"numberMisscheduled", 0},
         {"desiredNumberScheduled", 0},
         {"numberReady", 0}}}});
  return types;
}

MergeTypes pod_disruption_budget_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_atomic_map("spec.selector");
  types.set_list("status.conditions", keyed({"type"}));
  types.set_ignored("", {{"status"}});
  types.set_ignored("status", {{"spec"}});
  types.set_zero_value({{"metadata", zero_meta()},
                        {"spec", json::object()},
                        {"status",
                         {{"disruptionsAllowed", 0},
                          {"currentHealthy", 0},
                          {"desiredHealthy", 0},
                          {"expectedPods", 0}}}});
  return types;
}

MergeTypes admission_policy_types() {
  MergeTypes types;
  add_object_meta(types);
  types.set_list("status.conditions", keyed({"type"}));
  types.set_ignored("", {{"status"}});
  types.set_ignored("status", {{"spec"}});
  types.set_zero_value({{"metadata", zero_meta()}, {"spec", json::object()}});
  return types;
}

MergeTypes admission_policy_binding_types() {
  MergeTypes types = metadata_only_types();
  types.set_zero_value({{"metadata", zero_meta()}, {"spec", json::object()}});
  return types;
}

// RBAC: rules and subjects are atomic lists, roleRef an atomic struct.
MergeTypes role_types() {
  MergeTypes types = metadata_only_types();
  types.set_zero_value({{"metadata", zero_meta()}, {"rules", nullptr}});
  return types;
}

MergeTypes binding_types() {
  MergeTypes types = metadata_only_types();
  types.set_atomic_map("roleRef");
  types.set_zero_value(
      {{"metadata", zero_meta()}, {"roleRef", {{"apiGroup", ""}, {"kind", ""}, {"name", ""}}}});
  return types;
}

// Walks a structural schema, declaring what x-kubernetes-list-type and x-kubernetes-map-type say.
void declare_from_schema(MergeTypes& types, const json& schema, const std::string& pattern) {
  if (!schema.is_object()) return;
  const std::string prefix = pattern.empty() ? "" : pattern + ".";
  if (schema.value("x-kubernetes-map-type", "") == "atomic" && !pattern.empty()) {
    types.set_atomic_map(pattern);
  }
  if (const auto list_type = schema.value("x-kubernetes-list-type", ""); !list_type.empty()) {
    if (list_type == "set") {
      types.set_list(pattern, kSet);
    } else if (list_type == "map") {
      MergeTypes::ListRule rule{ListType::kMap, {}, json::object()};
      const json& item_properties = schema.contains("items") && schema["items"].is_object()
                                        ? schema["items"].value("properties", json::object())
                                        : json::object();
      for (const auto& key : schema.value("x-kubernetes-list-map-keys", json::array())) {
        const std::string name = key.get<std::string>();
        rule.keys.push_back(name);
        if (item_properties.contains(name) && item_properties[name].contains("default")) {
          rule.key_defaults[name] = item_properties[name]["default"];
        }
      }
      types.set_list(pattern, std::move(rule));
    }
  }
  if (schema.contains("properties") && schema["properties"].is_object()) {
    for (const auto& [name, child] : schema["properties"].items()) {
      if (pattern.empty() && name == "metadata") continue;  // ObjectMeta's rules are built in
      declare_from_schema(types, child, prefix + name);
    }
  }
  if (schema.contains("additionalProperties")) {
    declare_from_schema(types, schema["additionalProperties"], prefix + "*");
  }
  if (schema.contains("items")) declare_from_schema(types, schema["items"], pattern + "[]");
}

}  // namespace

MergeTypes MergeTypes::custom_resource_defaults() {
  MergeTypes types;
  add_object_meta(types);
  types.set_ignored("", {{"status"}});
  types.set_ignored("status", {{"spec"}});
  return types;
}

MergeTypes MergeTypes::for_crd_version(const json& crd_version) {
  MergeTypes types;
  add_object_meta(types);
  if (crd_version.contains("schema") && crd_version["schema"].contains("openAPIV3Schema")) {
    declare_from_schema(types, crd_version["schema"]["openAPIV3Schema"], "");
  }
  const json subresources = crd_version.value("subresources", json::object());
  if (subresources.is_object() && subresources.contains("status")) {
    types.set_ignored("", {{"status"}});
    types.set_ignored("status", {{"spec"}});
  }
  return types;
}

MergeTypes MergeTypes::for_kind(const std::string& api_version, const std::string& kind) {
  static const std::vector<std::pair<std::pair<std::string, std::string>, MergeTypes (*)()>>
      builtins = {
          {{"v1", "Pod"}, pod_types},
          {{"v1", "Node"}, node_types},
          {{"v1", "Namespace"}, namespace_types},
          {{"v1", "Service"}, service_types},
          {{"v1", "ServiceAccount"}, service_account_types},
          {{"v1", "ConfigMap"}, metadata_only_types},
          {{"v1", "Secret"}, metadata_only_types},
          {{"v1", "Event"}, core_event_types},
          {{"events.k8s.io/v1", "Event"}, events_v1_event_types},
          {{"coordination.k8s.io/v1", "Lease"}, lease_types},
          {{"apiextensions.k8s.io/v1", "CustomResourceDefinition"}, crd_types},
          {{"apps/v1", "Deployment"}, workload_types},
          {{"apps/v1", "DaemonSet"}, daemon_set_types},
          {{"policy/v1", "PodDisruptionBudget"}, pod_disruption_budget_types},
          {{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"},
           admission_policy_types},
          {{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"},
           admission_policy_binding_types},
          {{"rbac.authorization.k8s.io/v1", "Role"}, role_types},
          {{"rbac.authorization.k8s.io/v1", "ClusterRole"}, role_types},
          {{"rbac.authorization.k8s.io/v1", "RoleBinding"}, binding_types},
          {{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding"}, binding_types},
      };
  for (const auto& [key, make] : builtins) {
    if (key.first == api_version && key.second == kind) return make();
  }
  return custom_resource_defaults();
}

const MergeTypes::ListRule& MergeTypes::list_rule(const std::string& pattern) const {
  static const ListRule kAtomicList{};
  if (auto it = lists_.find(pattern); it != lists_.end()) return it->second;
  for (const auto& [declared, rule] : lists_) {
    if (matches(declared, pattern)) return rule;
  }
  return kAtomicList;
}

bool MergeTypes::atomic_map(const std::string& pattern) const {
  for (const auto& declared : atomic_maps_) {
    if (declared == pattern || matches(declared, pattern)) return true;
  }
  return false;
}

const Paths& MergeTypes::ignored_fields(const std::string& subresource) const {
  static const Paths kNone;
  auto it = ignored_.find(subresource);
  return it == ignored_.end() ? kNone : it->second;
}

json MergeTypes::empty_object(const std::string& api_version, const std::string& kind) const {
  json out = zero_;
  out["apiVersion"] = api_version;
  out["kind"] = kind;
  return out;
}

void MergeTypes::set_list(const std::string& pattern, ListRule rule) {
  lists_[pattern] = std::move(rule);
}

void MergeTypes::set_atomic_map(const std::string& pattern) { atomic_maps_.push_back(pattern); }

void MergeTypes::set_ignored(const std::string& subresource, Paths paths) {
  ignored_[subresource] = std::move(paths);
}

void MergeTypes::set_zero_value(json zero) { zero_ = std::move(zero); }

}  // namespace tessel::testing
