// The kinds an installation of tessel (helm/tessel, helm/tessel-member) writes beyond
// kube::builtin_resources(), served as kube-apiserver v1.26 serves them:
// rbac.authorization.k8s.io/v1 roles, clusterroles, rolebindings, clusterrolebindings. They are
// stored objects with their defaults and validation (builtin_semantics_rbac.cpp); the RBAC
// authorizer (api_rbac.h) reads them. authorization.k8s.io/v1 selfsubjectaccessreviews, which
// `kubectl auth can-i` creates, is answered, never stored (api_access_review.h).
#pragma once

#include <vector>

#include "kube/resource.h"

namespace tessel::testing {

const std::vector<kube::ResourceInfo>& install_resources();

}  // namespace tessel::testing
