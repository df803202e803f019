#include "tests/support/api_install_resources.h"

namespace tessel::testing {

const std::vector<kube::ResourceInfo>& install_resources() {
  static const std::vector<kube::ResourceInfo> resources = {
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
  };
  return resources;
}

}  // namespace tessel::testing
