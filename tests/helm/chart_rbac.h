// A chart's identities and RBAC, applied to a cluster from what `helm template` rendered, with
// each rule of each Role and ClusterRole removable: for the test that every rule is needed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/config.h"

namespace tessel::testing::helm {

// One rendered Role or ClusterRole and its rules as rendered.
struct RenderedRole {
  std::string kind;            // "Role" or "ClusterRole"
  std::string namespace_name;  // "" for a ClusterRole
  std::string name;
  nlohmann::json rules;  // the array of PolicyRules
};

// "ClusterRole t-tessel rule 3 (get,list,watch trainingjobs.tessel.dev)"; a Role's says its
// namespace, a rule with resourceNames names them.
std::string describe_rule(const RenderedRole& role, std::size_t index);

// The rendered objects (a `helm template` stream) as JSON, with the args of the named
// container of the one object of `kind` (Deployment, DaemonSet).
std::vector<nlohmann::json> rendered_objects(const std::string& yaml);
std::vector<std::string> container_args(const std::vector<nlohmann::json>& objects,
                                        const std::string& kind);
// The value of --name=VALUE in args; `absent` when not given.
std::string flag_value(const std::vector<std::string>& args, const std::string& name,
                       const std::string& absent = "");

// The ServiceAccounts, Roles, ClusterRoles, RoleBindings and ClusterRoleBindings of a rendered
// chart, created in a cluster (their namespaces must exist). The cluster-scoped ones are deleted
// when this goes (the namespaced ones go with their namespaces).
class ChartRbac {
 public:
  ChartRbac(kube::Client& admin, const std::vector<nlohmann::json>& objects);
  ~ChartRbac();
  ChartRbac(const ChartRbac&) = delete;
  ChartRbac& operator=(const ChartRbac&) = delete;

  const std::vector<RenderedRole>& roles() const { return roles_; }
  // Replaces the role's rules in the cluster (PUT), with `rules` (a JSON array).
  void set_rules(const RenderedRole& role, const nlohmann::json& rules);

 private:
  kube::Client& admin_;
  std::vector<RenderedRole> roles_;
  std::vector<nlohmann::json> cluster_scoped_;  // created, to delete
};

// The rules of `role` without the index-th.
nlohmann::json without_rule(const RenderedRole& role, std::size_t index);

// `kubectl create token <service_account> -n <ns>` against the cluster of `kubeconfig`: a
// bound token of an hour, as a user gets one.
std::string create_token(const std::string& kubeconfig, const std::string& ns,
                         const std::string& service_account);

// `config` with its credentials replaced by a bearer token.
kube::ClusterConfig with_token(kube::ClusterConfig config, const std::string& token);

}  // namespace tessel::testing::helm
