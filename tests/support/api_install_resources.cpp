#include "tests/support/api_install_resources.h"

namespace tessel::testing {

const std::vector<kube::ResourceInfo>& install_resources() {
  static const std::vector<kube::ResourceInfo> resources = {
      {{"apps", "v1", "deployments"}, "Deployment", true, {"deploy"}, {"status", "scale"}},
      {{"apps", "v1", "daemonsets"}, "DaemonSet", true, {"ds"}, {"status"}},
      {{"policy", "v1", "poddisruptionbudgets"}, "PodDisruptionBudget", true, {"pdb"}, {"status"}},
      {{"admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"},
       "ValidatingAdmissionPolicy",
       false,
       {},
       {"status"}},
      {{"admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"},
       "ValidatingAdmissionPolicyBinding",
       false,
       {},
       {}},
      {{"rbac.authorization.k8s.io", "v1", "clusterrolebindings"},
       "ClusterRoleBinding",
       false,
       {},
       {}},
      {{"rbac.authorization.k8s.io", "v1", "clusterroles"}, "ClusterRole", false, {}, {}},
      {{"rbac.authorization.k8s.io", "v1", "rolebindings"}, "RoleBinding", true, {}, {}},
      {{"rbac.authorization.k8s.io", "v1", "roles"}, "Role", true, {}, {}},
      {{"authorization.k8s.io", "v1", "selfsubjectaccessreviews"},
       "SelfSubjectAccessReview",
       false,
       {},
       {}},
      {{"authorization.k8s.io", "v1", "selfsubjectrulesreviews"},
       "SelfSubjectRulesReview",
       false,
       {},
       {}},
  };
  return resources;
}

}  // namespace tessel::testing
