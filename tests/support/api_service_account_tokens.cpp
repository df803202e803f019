#include "tests/support/api_service_account_tokens.h"

#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

#include "kube/base64.h"
#include "tests/support/api_errors.h"
#include "tests/support/api_object_meta.h"
#include "tests/support/api_object_rules.h"
#include "tests/support/builtin_semantics_errors.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::system_clock;

constexpr std::int64_t kDefaultExpirationSeconds = 3600;  // TokenRequest's v1 default
constexpr std::int64_t kMinExpirationSeconds = 600;
constexpr std::int64_t kMaxExpirationSeconds = std::int64_t{1} << 32;
constexpr const char* kIssuer = "https://kubernetes.default.svc.cluster.local";

std::string base64url(const std::string& bytes) {
  std::string text = kube::base64_encode(bytes);
  while (!text.empty() && text.back() == '=') text.pop_back();
  std::replace(text.begin(), text.end(), '+', '-');
  std::replace(text.begin(), text.end(), '/', '_');
  return text;
}

std::string random_bytes(std::size_t count) {
  std::string bytes(count, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(count)) != 1) {
    throw std::runtime_error("RAND_bytes failed");
  }
  return bytes;
}

std::string meta(const json& object, const char* field) {
  const json metadata = object.value("metadata", json::object());
  return metadata.contains(field) && metadata[field].is_string()
             ? metadata[field].get<std::string>()
             : "";
}

std::int64_t unix_seconds(Clock::time_point time) {
  return std::chrono::duration_cast<std::chrono::seconds>(time.time_since_epoch()).count();
}

// The stored object of a bound kind, or nullopt.
std::optional<json> bound_object(const ObjectStore& store, const std::string& kind,
                                 const std::string& namespace_, const std::string& name) {
  if (kind == "Pod") return store.get({"", "pods"}, namespace_, name);
  if (kind == "Secret") return store.get({"", "secrets"}, namespace_, name);
  return std::nullopt;
}

}  // namespace

UserInfo service_account_user(const std::string& namespace_, const std::string& name) {
  return {"system:serviceaccount:" + namespace_ + ":" + name,
          {"system:serviceaccounts", "system:serviceaccounts:" + namespace_}};
}

std::string ServiceAccountTokens::issue(const json& account,
                                        const std::vector<std::string>& audiences,
                                        std::optional<Clock::time_point> expires, const json& bound,
                                        const std::string& secret) {
  Issued issued{meta(account, "namespace"),
                meta(account, "name"),
                meta(account, "uid"),
                expires,
                "",
                "",
                "",
                secret};
  const Clock::time_point now = Clock::now();
  json claims = {{"iss", kIssuer},
                 {"sub", service_account_user(issued.namespace_, issued.account).name},
                 {"aud", audiences},
                 {"iat", unix_seconds(now)},
                 {"nbf", unix_seconds(now)}};
  json kubernetes = {{"namespace", issued.namespace_},
                     {"serviceaccount", {{"name", issued.account}, {"uid", issued.account_uid}}}};
  if (expires) claims["exp"] = unix_seconds(*expires);
  if (bound.is_object()) {
    issued.bound_kind = bound.value("kind", "");
    issued.bound_name = bound.value("name", "");
    issued.bound_uid = bound.value("uid", "");
    std::string claim = issued.bound_kind;
    std::transform(claim.begin(), claim.end(), claim.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    kubernetes[claim] = {{"name", issued.bound_name}, {"uid", issued.bound_uid}};
  }
  if (!secret.empty()) kubernetes["secret"] = {{"name", secret}};
  claims["kubernetes.io"] = kubernetes;
  const std::string token = base64url(json{{"alg", "RS256"}, {"kid", "tessel-test"}}.dump()) + "." +
                            base64url(claims.dump()) + "." + base64url(random_bytes(32));
  std::lock_guard lock(mutex_);
  issued_[token] = std::move(issued);
  return token;
}

bool ServiceAccountTokens::still_valid(const std::string& token, const Issued& issued) const {
  if (issued.expires && Clock::now() >= *issued.expires) return false;
  const std::optional<json> account =
      store_.get({"", "serviceaccounts"}, issued.namespace_, issued.account);
  if (!account || meta(*account, "uid") != issued.account_uid) return false;
  if (!issued.bound_kind.empty()) {
    const std::optional<json> bound =
        bound_object(store_, issued.bound_kind, issued.namespace_, issued.bound_name);
    if (!bound || (!issued.bound_uid.empty() && meta(*bound, "uid") != issued.bound_uid)) {
      return false;
    }
  }
  if (!issued.secret.empty()) {
    const std::optional<json> secret =
        store_.get({"", "secrets"}, issued.namespace_, issued.secret);
    if (!secret) return false;
    const json data = secret->value("data", json::object());
    if (data.value("token", "") != kube::base64_encode(token)) return false;
  }
  return true;
}

std::optional<UserInfo> ServiceAccountTokens::authenticate(const std::string& token) const {
  Issued issued;
  {
    std::lock_guard lock(mutex_);
    const auto found = issued_.find(token);
    if (found == issued_.end()) return std::nullopt;
    issued = found->second;
  }
  if (!still_valid(token, issued)) return std::nullopt;
  return service_account_user(issued.namespace_, issued.account);
}

json ServiceAccountTokens::answer_token_request(const std::string& namespace_,
                                                const std::string& name, const json& body) {
  if (!body.is_object() || body.value("kind", "") != "TokenRequest" ||
      body.value("apiVersion", "") != "authentication.k8s.io/v1") {
    throw bad_request(
        "the body of a TokenRequest must be an authentication.k8s.io/v1 "
        "TokenRequest");
  }
  const std::optional<json> account = store_.get({"", "serviceaccounts"}, namespace_, name);
  if (!account) throw not_found({"", "serviceaccounts"}, name);
  json spec = body.value("spec", json::object());
  if (!spec.contains("expirationSeconds") || spec["expirationSeconds"].is_null()) {
    spec["expirationSeconds"] = kDefaultExpirationSeconds;
  }
  const json& seconds = spec["expirationSeconds"];
  const std::int64_t expiration = seconds.is_number_integer() ? seconds.get<std::int64_t>() : 0;
  std::vector<FieldError> errors;
  if (expiration < kMinExpirationSeconds) {
    errors.push_back(validation::invalid("spec.expirationSeconds", expiration,
                                         "may not specify a duration less than 10 minutes"));
  }
  if (expiration > kMaxExpirationSeconds) {
    errors.push_back(validation::invalid("spec.expirationSeconds", expiration,
                                         "may not specify a duration larger than 2^32 seconds"));
  }
  if (!errors.empty()) throw invalid("TokenRequest", "authentication.k8s.io", name, errors);
  if (!spec.contains("audiences") || !spec["audiences"].is_array() || spec["audiences"].empty()) {
    spec["audiences"] = json::array({kApiAudience});
  }
  json bound = spec.value("boundObjectRef", json());
  if (bound.is_object()) {
    const std::string kind = bound.value("kind", "");
    const std::string bound_name = bound.value("name", "");
    if (kind != "Pod" && kind != "Secret") {
      throw bad_request("cannot bind token for serviceaccount \"" + name + "\" to object of type " +
                        kind);
    }
    const std::optional<json> object = bound_object(store_, kind, namespace_, bound_name);
    const GroupResource resource{"", kind == "Pod" ? "pods" : "secrets"};
    if (!object) throw not_found(resource, bound_name);
    const std::string uid = bound.value("uid", "");
    if (!uid.empty() && uid != meta(*object, "uid")) {
      throw conflict_with_message(
          resource, bound_name,
          "the UID in the bound object reference (" + uid +
              ") does not match the UID in record. The object might have been deleted and then "
              "recreated");
    }
    bound["uid"] = meta(*object, "uid");
  } else {
    spec["boundObjectRef"] = nullptr;
  }
  const Clock::time_point expires = Clock::now() + std::chrono::seconds(expiration);
  const std::string token =
      issue(*account, spec["audiences"].get<std::vector<std::string>>(), expires, bound, "");
  return {{"kind", "TokenRequest"},
          {"apiVersion", "authentication.k8s.io/v1"},
          {"metadata", {{"name", name}, {"namespace", namespace_}, {"creationTimestamp", nullptr}}},
          {"spec", spec},
          {"status",
           {{"token", token},
            {"expirationTimestamp",
             rfc3339(std::chrono::time_point_cast<std::chrono::seconds>(expires))}}}};
}

}  // namespace tessel::testing
