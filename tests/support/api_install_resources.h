// The kinds an installation of tessel (helm/tessel, helm/tessel-member) writes beyond
// kube::builtin_resources(), served as kube-apiserver serves them: apps/v1 deployments (with
// the scale subresource, api_scale.h) and daemonsets, policy/v1 poddisruptionbudgets (each with
// its status subresource),
// rbac.authorization.k8s.io/v1 roles, clusterroles, rolebindings, clusterrolebindings,
// admissionregistration.k8s.io/v1 validatingadmissionpolicies (status) and
// validatingadmissionpolicybindings (the GA version of 1.30, which the member chart writes).
// They are stored objects with their defaults and validation (builtin_semantics_apps.cpp,
// builtin_semantics_rbac.cpp, builtin_semantics_admission_policy.cpp), Table columns and merge
// keys; no controller acts on them: a Deployment makes no ReplicaSet or Pod, a DaemonSet no
// Pod, a ValidatingAdmissionPolicy is not enforced (no CEL). The RBAC authorizer (api_rbac.h)
// reads the RBAC objects. authorization.k8s.io/v1 selfsubjectaccessreviews and
// selfsubjectrulesreviews, which `kubectl auth can-i [--list]` creates, are answered, never
// stored (api_access_review.h).
#pragma once

#include <vector>

#include "kube/resource.h"

namespace tessel::testing {

const std::vector<kube::ResourceInfo>& install_resources();

}  // namespace tessel::testing
