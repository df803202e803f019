// authorization.k8s.io/v1 SelfSubjectAccessReview (what `kubectl auth can-i` creates): the
// server asks its authorizer about the requesting user and answers with status.allowed; and
// SelfSubjectRulesReview (`kubectl auth can-i --list`): the rules the user holds in a namespace.
// Not stored, as on a real server. Access reviews carry no reason (kube-apiserver's RBAC gives
// one for an allowed request; kubectl prints only yes or no for it).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/api_test_server.h"

namespace tessel::testing {

// The 201 body for a review `body` from `user`. ApiError 400 for a body that is not a
// SelfSubjectAccessReview, 422 when it names neither or both of spec.resourceAttributes and
// spec.nonResourceAttributes.
nlohmann::json answer_self_subject_access_review(const nlohmann::json& body, const UserInfo& user,
                                                 const Authorizer& authorizer);

// The PolicyRules a user holds in a namespace; nullopt when the authorizer cannot list them.
using RuleResolver = std::function<std::optional<std::vector<nlohmann::json>>(
    const UserInfo& user, const std::string& namespace_)>;
// What the default authorizer grants an authenticated user: everything.
std::optional<std::vector<nlohmann::json>> allow_everything_rules(const UserInfo& user,
                                                                  const std::string& namespace_);

// The 201 body for a rules review `body`: status.resourceRules and nonResourceRules, and
// incomplete when the resolver cannot list rules (an authorizer set by a test). ApiError 400 for
// a body that is not a SelfSubjectRulesReview, 422 without spec.namespace.
nlohmann::json answer_self_subject_rules_review(const nlohmann::json& body, const UserInfo& user,
                                                const RuleResolver& resolver);

}  // namespace tessel::testing
