// The request handling of the Kubernetes API test server, as a function from request to
// response (no sockets): authentication and authorization, then discovery, OpenAPI, /version,
// health checks, or the verbs on resources; every failure as the Status (or plain-text 404)
// kube-apiserver answers.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "tests/support/api_access_review.h"
#include "tests/support/api_auth.h"
#include "tests/support/api_resources.h"
#include "tests/support/api_service_account_tokens.h"
#include "tests/support/api_store.h"
#include "tests/support/api_test_server.h"
#include "tests/support/api_verbs.h"
#include "tests/support/api_watch.h"
#include "tests/support/http_server.h"

namespace tessel::testing {

class ApiHandler {
 public:
  ApiHandler(ObjectStore& store, ServedResources& resources, ApiVerbs& verbs,
             Authenticator& authenticator, ServiceAccountTokens& tokens, std::string git_version,
             WatchSettings watch_settings);

  HttpServerResponse handle(const HttpServerRequest& request) const;

  // An empty authorizer restores the default one (and its rules: everything). `rules`: how
  // SelfSubjectRulesReviews list a user's rules under this authorizer (null: they cannot).
  void set_authorizer(Authorizer authorizer, RuleResolver rules = nullptr);
  // Whether the request opens a watch (fault injection may spare watches).
  static bool is_watch(const HttpServerRequest& request);

 private:
  HttpServerResponse handle_non_resource(const HttpServerRequest& request,
                                         const ApiPath& path) const;
  // `user`: who asks (admission webhooks are told).
  HttpServerResponse handle_resource(const HttpServerRequest& request, const ApiPath& path,
                                     const UserInfo& user) const;
  HttpServerResponse read(const HttpServerRequest& request, const ObjectRef& ref,
                          const RequestOptions& options) const;
  // What is answered, not stored: SelfSubjectAccessReviews and TokenRequests; nullopt for
  // other requests.
  std::optional<HttpServerResponse> answer_review(const HttpServerRequest& request,
                                                  const ResourceType& type, const ApiPath& path,
                                                  const UserInfo& user) const;
  Authorizer authorizer() const;
  RuleResolver rule_resolver() const;
  // Whether the user may escalate and bind every role cluster-wide (system:masters, any user of
  // the default authorizer): RBAC writes then need no escalation check.
  bool may_escalate_anything(const UserInfo& user) const;

  ObjectStore& store_;
  ServedResources& resources_;
  ApiVerbs& verbs_;
  Authenticator& authenticator_;
  ServiceAccountTokens& tokens_;
  std::string git_version_;
  WatchSettings watch_settings_;
  mutable std::mutex authorizer_mutex_;
  Authorizer authorizer_;
  RuleResolver rule_resolver_;
};

// An HTTP response carrying `body` as JSON, with one Warning header per warning.
HttpServerResponse json_response(int status, const nlohmann::json& body,
                                 const std::vector<std::string>& warnings = {});
HttpServerResponse error_response(const ApiError& error);

}  // namespace tessel::testing
