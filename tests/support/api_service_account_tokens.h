// Service-account tokens as kube-apiserver issues and checks them: the TokenRequest
// subresource (POST /api/v1/namespaces/N/serviceaccounts/S/token, what `kubectl create token`
// sends) and the tokens the legacy token controller puts into kubernetes.io/service-account-token
// Secrets (api_token_controller.h). A token authenticates as system:serviceaccount:N:S with the
// groups system:serviceaccounts and system:serviceaccounts:N for as long as it is valid: its
// ServiceAccount still exists with the uid it was issued for, a TokenRequest's token has not
// expired and the object it is bound to (a Pod or a Secret) still exists with its uid, a Secret's
// token is still that Secret's data.token.
//
// Tokens look like the JWTs a real server signs (header.claims.signature, base64url, with the
// claims a real token carries) so that tools that decode them see the usual fields; the server
// recognises them by value, not by signature.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tests/support/api_store.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {

// The audience a token gets when the request names none: the API server's own (as
// --api-audiences defaults to the issuer).
inline constexpr const char* kApiAudience = "https://kubernetes.default.svc.cluster.local";

class ServiceAccountTokens {
 public:
  explicit ServiceAccountTokens(const ObjectStore& store) : store_(store) {}

  // A token for the ServiceAccount `account` (the stored object). `expires`: nullopt for a
  // Secret's token, which does not expire. `bound`: the object (kind, name, uid) the token is
  // bound to, or null. `secret`: the name of the Secret that holds it, or "".
  std::string issue(const nlohmann::json& account, const std::vector<std::string>& audiences,
                    std::optional<std::chrono::system_clock::time_point> expires,
                    const nlohmann::json& bound, const std::string& secret);

  // The user a token authenticates as; nullopt when it is not a service-account token this
  // server issued or it is no longer valid.
  std::optional<UserInfo> authenticate(const std::string& token) const;

  // Answers a TokenRequest for ServiceAccount `name` in `namespace_` (the 201 body). ApiError
  // 404 when the ServiceAccount (or the bound object) is missing, 400 for a body that is not a
  // TokenRequest, 422 for an expirationSeconds out of range, 409 when the bound object's uid is
  // not the stored one.
  nlohmann::json answer_token_request(const std::string& namespace_, const std::string& name,
                                      const nlohmann::json& body);

 private:
  struct Issued {
    std::string namespace_;
    std::string account;
    std::string account_uid;
    std::optional<std::chrono::system_clock::time_point> expires;
    std::string bound_kind;  // "Pod", "Secret" or ""
    std::string bound_name;
    std::string bound_uid;
    std::string secret;
  };
  bool still_valid(const std::string& token, const Issued& issued) const;

  const ObjectStore& store_;
  mutable std::mutex mutex_;
  std::map<std::string, Issued> issued_;
};

// A service account's user name and groups.
UserInfo service_account_user(const std::string& namespace_, const std::string& name);

}  // namespace tessel::testing
