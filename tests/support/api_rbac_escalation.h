// RBAC's escalation prevention, as kube-apiserver's RBAC storage makes it: a user may write a
// Role or ClusterRole only with rules it holds itself (in the role's namespace, or cluster-wide
// for a ClusterRole) unless it may "escalate" on it, and a RoleBinding or ClusterRoleBinding
// only to a role whose rules it holds unless it may "bind" that role. system:masters may always.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/api_access_review.h"
#include "tests/support/api_resources.h"
#include "tests/support/api_store.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {

// Whether `type` is one of the four RBAC kinds this applies to.
bool is_rbac_kind(const ResourceType& type);

// Throws ApiError 403 when `user` may not write `object` (the RBAC object as it would be
// stored), worded as kube-apiserver words it: `... is forbidden: user "u" (groups=[...]) is
// attempting to grant RBAC permissions not currently held:\n{APIGroups:[...], ...}`. `rules`
// lists what the user holds; when it cannot (nullopt), nothing is checked.
void confirm_no_escalation(const ResourceType& type, const nlohmann::json& object,
                           const UserInfo& user, const Authorizer& authorizer,
                           const RuleResolver& rules, const ObjectStore& store);

}  // namespace tessel::testing
