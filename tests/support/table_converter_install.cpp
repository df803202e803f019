// The Table columns of the kinds an installation writes (api_builtin_resources.cpp), as
// kube-apiserver 1.26's printers make them (pkg/printers/internalversion), wide columns
// included.
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/table_converter_columns.h"
#include "tests/support/table_converter_time.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using TimePoint = std::chrono::system_clock::time_point;

const json& field(const json& object, const char* pointer) {
  static const json null_value;
  const json::json_pointer path(pointer);
  return object.contains(path) ? object.at(path) : null_value;
}

std::string text(const json& object, const char* pointer) {
  const json& value = field(object, pointer);
  return value.is_string() ? value.get<std::string>() : "";
}

json name_column() {
  return column_definition("Name", "string", kNameColumnDescription, 0, "name");
}

json age_column() { return column_definition("Age", "string", kCreationTimestampDescription); }

std::string age(const json& object, TimePoint now) {
  return age_cell(field(object, "/metadata/creationTimestamp"), now);
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ", ") + part;
  return out;
}

// Roles and ClusterRoles: Name, Created At.
std::shared_ptr<TableColumns> role_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {name_column(),
                          column_definition("Created At", "date", kCreationTimestampDescription)};
  columns->cells = [](const json& role, TimePoint) {
    return json{text(role, "/metadata/name"),
                rfc3339_cell(field(role, "/metadata/creationTimestamp"))};
  };
  return columns;
}

// RoleBindings and ClusterRoleBindings: Name, Role (Kind/name), Age; wide: the subjects.
std::shared_ptr<TableColumns> binding_columns(const char* role_ref_description) {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {
      name_column(),
      column_definition("Role", "string", role_ref_description),
      age_column(),
      column_definition("Users", "string", "Users in the roleBinding", 1),
      column_definition("Groups", "string", "Groups in the roleBinding", 1),
      column_definition("ServiceAccounts", "string", "ServiceAccounts in the roleBinding", 1)};
  columns->cells = [](const json& binding, TimePoint now) {
    std::vector<std::string> users, groups, accounts;
    const json& subjects = field(binding, "/subjects");
    for (const json& subject : subjects.is_array() ? subjects : json::array()) {
      const std::string kind = subject.value("kind", "");
      const std::string name = subject.value("name", "");
      if (kind == "User") users.push_back(name);
      if (kind == "Group") groups.push_back(name);
      if (kind == "ServiceAccount") accounts.push_back(subject.value("namespace", "") + ":" + name);
    }
    return json{text(binding, "/metadata/name"),
                text(binding, "/roleRef/kind") + "/" + text(binding, "/roleRef/name"),
                age(binding, now),
                joined(users),
                joined(groups),
                joined(accounts)};
  };
  return columns;
}

std::int64_t number(const json& object, const char* pointer) {
  const json& value = field(object, pointer);
  return value.is_number_integer() ? value.get<std::int64_t>() : 0;
}

// An IntOrString cell, or N/A.
std::string int_or_string(const json& value) {
  if (value.is_number_integer()) return std::to_string(value.get<std::int64_t>());
  return value.is_string() ? value.get<std::string>() : "N/A";
}

// labels.FormatLabels: "k=v,k2=v2" in key order, or <none>.
std::string format_labels(const json& labels) {
  std::vector<std::string> parts;
  if (labels.is_object()) {
    for (const auto& [key, value] : labels.items()) {
      parts.push_back(key + "=" + (value.is_string() ? value.get<std::string>() : ""));
    }
  }
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ",") + part;
  return out.empty() ? "<none>" : out;
}

// metav1.FormatLabelSelector: matchLabels as k=v, then "key op (values)" expressions.
std::string format_selector(const json& selector) {
  if (!selector.is_object()) return "<none>";
  std::vector<std::string> parts;
  const json& labels = field(selector, "/matchLabels");
  if (labels.is_object()) {
    for (const auto& [key, value] : labels.items()) {
      parts.push_back(key + "=" + (value.is_string() ? value.get<std::string>() : ""));
    }
  }
  const json& expressions = field(selector, "/matchExpressions");
  for (const json& expression : expressions.is_array() ? expressions : json::array()) {
    const std::string op = expression.value("operator", "");
    std::string values;
    for (const json& value : expression.value("values", json::array())) {
      values += (values.empty() ? "" : ",") + value.get<std::string>();
    }
    const std::string key = expression.value("key", "");
    if (op == "In") parts.push_back(key + " in (" + values + ")");
    if (op == "NotIn") parts.push_back(key + " notin (" + values + ")");
    if (op == "Exists") parts.push_back(key);
    if (op == "DoesNotExist") parts.push_back("!" + key);
  }
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ",") + part;
  return out.empty() ? "<none>" : out;
}

// The wide columns of a workload: its template's container names and images, its selector.
json workload_wide_columns_cells(const json& workload) {
  std::vector<std::string> names, images;
  const json& containers = field(workload, "/spec/template/spec/containers");
  for (const json& container : containers.is_array() ? containers : json::array()) {
    names.push_back(container.value("name", ""));
    images.push_back(container.value("image", ""));
  }
  const auto comma = [](const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& part : parts) out += (out.empty() ? "" : ",") + part;
    return out;
  };
  return json{comma(names), comma(images), format_selector(field(workload, "/spec/selector"))};
}

std::vector<json> workload_wide_columns(const char* selector_description) {
  return {column_definition("Containers", "string", "Names of each container in the template.", 1),
          column_definition("Images", "string",
                            "Images referenced by each container in the "
                            "template.",
                            1),
          column_definition("Selector", "string", selector_description, 1)};
}

std::shared_ptr<TableColumns> deployment_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {
      name_column(), column_definition("Ready", "string", "Number of the pod with ready state"),
      column_definition("Up-to-date", "string",
                        "Total number of non-terminated pods targeted by this deployment that "
                        "have the desired template spec."),
      column_definition("Available", "string",
                        "Total number of available pods (ready for at least minReadySeconds) "
                        "targeted by this deployment."),
      age_column()};
  for (json& wide : workload_wide_columns(
           "Label selector for pods. Existing ReplicaSets whose pods are selected by this will "
           "be the ones affected by this deployment.")) {
    columns->definitions.push_back(std::move(wide));
  }
  columns->cells = [](const json& deployment, TimePoint now) {
    json cells = {text(deployment, "/metadata/name"),
                  std::to_string(number(deployment, "/status/readyReplicas")) + "/" +
                      std::to_string(number(deployment, "/spec/replicas")),
                  number(deployment, "/status/updatedReplicas"),
                  number(deployment, "/status/availableReplicas"), age(deployment, now)};
    for (json& cell : workload_wide_columns_cells(deployment)) cells.push_back(std::move(cell));
    return cells;
  };
  return columns;
}

std::shared_ptr<TableColumns> daemon_set_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {
      name_column(),
      column_definition("Desired", "integer",
                        "The total number of nodes that should be running the daemon pod "
                        "(including nodes correctly running the daemon pod)."),
      column_definition("Current", "integer",
                        "The number of nodes that are running at least 1 daemon pod and are "
                        "supposed to run the daemon pod."),
      column_definition("Ready", "integer",
                        "numberReady is the number of nodes that should be running the daemon "
                        "pod and have one or more of the daemon pod running with a Ready "
                        "Condition."),
      column_definition("Up-to-date", "integer",
                        "The total number of nodes that are running updated daemon pod"),
      column_definition("Available", "integer",
                        "The number of nodes that should be running the daemon pod and have one "
                        "or more of the daemon pod running and available (ready for at least "
                        "spec.minReadySeconds)"),
      column_definition("Node Selector", "string",
                        "NodeSelector is a selector which must be true for the pod to fit on a "
                        "node. Selector which must match a node's labels for the pod to be "
                        "scheduled on that node."),
      age_column()};
  for (json& wide : workload_wide_columns(
           "A label query over pods that are managed by the daemon set. Must match in order to "
           "be controlled. It must match the pod template's labels.")) {
    columns->definitions.push_back(std::move(wide));
  }
  columns->cells = [](const json& daemon_set, TimePoint now) {
    json cells = {text(daemon_set, "/metadata/name"),
                  number(daemon_set, "/status/desiredNumberScheduled"),
                  number(daemon_set, "/status/currentNumberScheduled"),
                  number(daemon_set, "/status/numberReady"),
                  number(daemon_set, "/status/updatedNumberScheduled"),
                  number(daemon_set, "/status/numberAvailable"),
                  format_labels(field(daemon_set, "/spec/template/spec/nodeSelector")),
                  age(daemon_set, now)};
    for (json& cell : workload_wide_columns_cells(daemon_set)) cells.push_back(std::move(cell));
    return cells;
  };
  return columns;
}

std::shared_ptr<TableColumns> pod_disruption_budget_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {
      name_column(),
      column_definition("Min Available", "string",
                        "The minimum number of pods that must be available simultaneously. This "
                        "can be either an integer or a string specifying a percentage, e.g. "
                        "\"28%\"."),
      column_definition("Max Unavailable", "string",
                        "The maximum number of pods that may be unavailable simultaneously. This "
                        "can be either an integer or a string specifying a percentage, e.g. "
                        "\"28%\"."),
      column_definition("Allowed Disruptions", "integer",
                        "Number of pod disruptions that are currently allowed."),
      age_column()};
  columns->cells = [](const json& budget, TimePoint now) {
    return json{text(budget, "/metadata/name"), int_or_string(field(budget, "/spec/minAvailable")),
                int_or_string(field(budget, "/spec/maxUnavailable")),
                number(budget, "/status/disruptionsAllowed"), age(budget, now)};
  };
  return columns;
}

std::shared_ptr<TableColumns> admission_policy_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {
      name_column(),
      column_definition("Validations", "integer", "Validations is the number of validations."),
      column_definition("ParamKind", "string", "ParamKind is the kind of param."), age_column()};
  columns->cells = [](const json& policy, TimePoint now) {
    const json& param = field(policy, "/spec/paramKind");
    const std::string kind = param.is_object()
                                 ? param.value("apiVersion", "") + "/" + param.value("kind", "")
                                 : "<unset>";
    const json& validations = field(policy, "/spec/validations");
    return json{text(policy, "/metadata/name"),
                static_cast<std::int64_t>(validations.is_array() ? validations.size() : 0), kind,
                age(policy, now)};
  };
  return columns;
}

std::shared_ptr<TableColumns> admission_policy_binding_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {
      name_column(),
      column_definition("PolicyName", "string", "PolicyName is the name of the policy."),
      column_definition("ParamRef", "string", "ParamRef is the reference to the param."),
      age_column()};
  columns->cells = [](const json& binding, TimePoint now) {
    const json& param = field(binding, "/spec/paramRef");
    std::string reference = "<unset>";
    if (param.is_object()) {
      const std::string ns = param.value("namespace", "");
      reference = (ns.empty() ? "" : ns + "/") + param.value("name", "*");
    }
    return json{text(binding, "/metadata/name"), text(binding, "/spec/policyName"), reference,
                age(binding, now)};
  };
  return columns;
}

}  // namespace

std::shared_ptr<const TableColumns> install_table_columns(const std::string& group,
                                                          const std::string& resource) {
  if (group == "apps" && resource == "deployments") return deployment_columns();
  if (group == "apps" && resource == "daemonsets") return daemon_set_columns();
  if (group == "policy" && resource == "poddisruptionbudgets") {
    return pod_disruption_budget_columns();
  }
  if (group == "admissionregistration.k8s.io") {
    if (resource == "validatingadmissionpolicies") return admission_policy_columns();
    if (resource == "validatingadmissionpolicybindings") return admission_policy_binding_columns();
  }
  if (group == "rbac.authorization.k8s.io") {
    if (resource == "roles" || resource == "clusterroles") return role_columns();
    if (resource == "rolebindings") {
      return binding_columns(
          "RoleRef can reference a Role in the current namespace or a ClusterRole in the global "
          "namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.");
    }
    if (resource == "clusterrolebindings") {
      return binding_columns(
          "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef "
          "cannot be resolved, the Authorizer must return an error.");
    }
  }
  return nullptr;
}

}  // namespace tessel::testing
