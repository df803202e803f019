// The Table columns of the kinds an installation writes (api_install_resources.h), as
// kube-apiserver 1.26's printers make them (pkg/printers/internalversion), wide columns
// included.
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

}  // namespace

std::shared_ptr<const TableColumns> install_table_columns(const std::string& group,
                                                          const std::string& resource) {
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
