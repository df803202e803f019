// authorization.k8s.io/v1 SelfSubjectAccessReview (what `kubectl auth can-i` creates): the
// server asks its authorizer about the requesting user and answers with status.allowed. Not
// stored, as on a real server. Answers carry no reason (kube-apiserver's RBAC gives one for an
// allowed request; kubectl prints only yes or no for it).
#pragma once

#include <nlohmann/json.hpp>

#include "tests/support/api_test_server.h"

namespace tessel::testing {

// The 201 body for a review `body` from `user`. ApiError 400 for a body that is not a
// SelfSubjectAccessReview, 422 when it names neither or both of spec.resourceAttributes and
// spec.nonResourceAttributes.
nlohmann::json answer_self_subject_access_review(const nlohmann::json& body, const UserInfo& user,
                                                 const Authorizer& authorizer);

}  // namespace tessel::testing
