// Authorization::kRbac: the authorizer chain of a kube-apiserver run with
// --authorization-mode=RBAC. The privileged group system:masters may do everything (as the
// server's privileged-group authorizer lets it, before RBAC); everyone else is decided as
// k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac decides, over the stored
// rbac.authorization.k8s.io/v1 objects: ClusterRoleBindings, then the RoleBindings of the
// request's namespace (to a Role there or to a ClusterRole), each subject a User, a Group or a
// ServiceAccount; a rule matches on verbs, apiGroups, resources ("res", "res/sub", "*",
// "*/sub"), resourceNames, or nonResourceURLs (a trailing "*" matches any suffix).
//
// RBAC's escalation prevention (writing a role or binding that grants more than its author
// holds) is api_rbac_escalation.h's.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "tests/support/api_store.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {

inline constexpr const char* kRbacGroup = "rbac.authorization.k8s.io";

class RbacAuthorizer {
 public:
  explicit RbacAuthorizer(const ObjectStore& store) : store_(store) {}
  bool operator()(const RequestAttributes& attributes) const;
  // Every PolicyRule the user holds in `namespace_` ("" for the cluster scope): the rules of the
  // roles its ClusterRoleBindings, then that namespace's RoleBindings, bind it to (RBAC's
  // RulesFor, which SelfSubjectRulesReviews answer with).
  std::vector<nlohmann::json> rules_for(const UserInfo& user, const std::string& namespace_) const;

 private:
  // Whether a rule of the (Cluster)Role `role_ref` names allows the request; `binding_namespace`
  // is the RoleBinding's namespace ("" for a ClusterRoleBinding).
  bool role_allows(const nlohmann::json& role_ref, const std::string& binding_namespace,
                   const RequestAttributes& attributes) const;
  // The rules of the (Cluster)Role a binding names; empty when it is missing.
  nlohmann::json role_rules(const nlohmann::json& role_ref,
                            const std::string& binding_namespace) const;

  const ObjectStore& store_;
};

// Whether one PolicyRule allows the request (RBAC's RuleAllows).
bool rule_allows(const nlohmann::json& rule, const RequestAttributes& attributes);
// Whether a binding subject (User, Group, ServiceAccount) is the user; `binding_namespace`
// stands in for a ServiceAccount subject's missing namespace.
bool subject_applies(const nlohmann::json& subject, const UserInfo& user,
                     const std::string& binding_namespace);

// The bootstrap policy every cluster has, as far as tessel and kubectl need it: the
// ClusterRoles cluster-admin, system:discovery, system:basic-user and
// system:public-info-viewer and their ClusterRoleBindings (cluster-admin to system:masters,
// the next two to system:authenticated, the last to system:authenticated and
// system:unauthenticated), as kube-apiserver's bootstrap policy writes them.
std::vector<nlohmann::json> rbac_bootstrap_policy();

}  // namespace tessel::testing
