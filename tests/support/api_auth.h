// Who a request to the Kubernetes API test server comes from and whether it may proceed:
// bearer tokens (the configured ones and service-account tokens) and client certificates (CN,
// O entries as groups) authenticate, a request with neither is system:anonymous; an unknown
// token is 401. Impersonate-User / Impersonate-Group headers then act as another user, when
// the authorizer lets the requester impersonate them. The authorizer decides on
// Kubernetes' request attributes; a denial is the 403 kube-apiserver words
// (`... is forbidden: User "u" cannot list resource "r" in API group "g" in the namespace
// "n"`).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/api_errors.h"
#include "tests/support/api_router.h"
#include "tests/support/api_test_server.h"
#include "tests/support/http_server.h"

namespace tessel::testing {

class ServiceAccountTokens;

class Authenticator {
 public:
  // service_account_tokens: also accepted, while valid (may be null).
  Authenticator(const std::vector<ApiTestServerOptions::Token>& tokens,
                const ServiceAccountTokens* service_account_tokens);
  void add_token(const std::string& token, const UserInfo& user);
  // nullopt: a bearer token nobody owns (401). Authenticated users get the group
  // system:authenticated, anonymous ones system:unauthenticated.
  std::optional<UserInfo> authenticate(const HttpServerRequest& request) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, UserInfo> tokens_;
  const ServiceAccountTokens* service_account_tokens_;
};

// The user a request acts as: `user`, or the one its Impersonate-User (and Impersonate-Group)
// headers name, as kube-apiserver's impersonation filter makes it (a ServiceAccount's user name
// gets its groups unless groups are named; system:authenticated is added). Throws ApiError 403
// (worded by forbidden_request) when the authorizer does not let `user` impersonate
// ("impersonate" on users, groups or serviceaccounts), 400 for groups without a user.
UserInfo impersonated_user(const HttpServerRequest& request, const UserInfo& user,
                           const Authorizer& authorizer);

// The attributes the authorizer is asked about.
RequestAttributes request_attributes(const HttpServerRequest& request, const ApiPath& path,
                                     const UserInfo& user, bool watch);

// Allows every authenticated user; system:anonymous only reads the public health and version
// endpoints, as RBAC's system:public-info-viewer role lets it.
bool default_authorizer(const RequestAttributes& attributes);

// The 403 for a denied request.
ApiError forbidden_request(const RequestAttributes& attributes);

}  // namespace tessel::testing
