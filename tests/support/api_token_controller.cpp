#include "tests/support/api_token_controller.h"

#include "kube/base64.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

constexpr const char* kTokenType = "kubernetes.io/service-account-token";
constexpr const char* kNameAnnotation = "kubernetes.io/service-account.name";
constexpr const char* kUidAnnotation = "kubernetes.io/service-account.uid";
constexpr const char* kManager = "kube-controller-manager";

std::string annotation(const json& object, const char* key) {
  const json annotations =
      object.value("metadata", json::object()).value("annotations", json::object());
  return annotations.is_object() && annotations.contains(key) && annotations[key].is_string()
             ? annotations[key].get<std::string>()
             : "";
}

std::string meta(const json& object, const char* field) {
  const json metadata = object.value("metadata", json::object());
  return metadata.contains(field) && metadata[field].is_string()
             ? metadata[field].get<std::string>()
             : "";
}

bool is_token_secret(const StoredObject& object) {
  return object && object->value("type", "") == kTokenType;
}

}  // namespace

TokenController::TokenController(ObjectStore& store, ServedResources& resources, ApiVerbs& verbs,
                                 ServiceAccountTokens& tokens, std::string ca_pem)
    : store_(store),
      resources_(resources),
      verbs_(verbs),
      tokens_(tokens),
      ca_pem_(std::move(ca_pem)),
      pass_([this] { run_once(); }) {}

void TokenController::observe(const StoredEvent& change) {
  const bool secret = change.collection == CollectionKey{"", "secrets"} &&
                      (is_token_secret(change.object) || is_token_secret(change.previous));
  const bool account = change.collection == CollectionKey{"", "serviceaccounts"} &&
                       change.type != StoredEvent::Type::kModified;
  if (secret || account) pass_.request();
}

void TokenController::run_once() {
  for (const auto& [key, secret] : store_.list({"", "secrets"}, "").items) {
    if (is_token_secret(secret)) sync(*secret);
  }
}

void TokenController::sync(const json& secret) {
  const auto secrets = resources_.find("", "v1", "secrets");
  const std::string namespace_ = meta(secret, "namespace");
  const ObjectRef ref{secrets, namespace_, meta(secret, "name"), ""};
  const std::optional<json> account =
      store_.get({"", "serviceaccounts"}, namespace_, annotation(secret, kNameAnnotation));
  const std::string wanted_uid = annotation(secret, kUidAnnotation);
  if (!account || (!wanted_uid.empty() && wanted_uid != meta(*account, "uid"))) {
    DeleteOptions options;
    options.precondition_uid = meta(secret, "uid");
    try {
      verbs_.remove(ref, options);
    } catch (const ApiError&) {
      // Gone already, or replaced: the next pass sees what is there now.
    }
    return;
  }
  const json data = secret.value("data", json::object());
  if (data.is_object() && data.contains("token") &&
      annotation(secret, kUidAnnotation) == meta(*account, "uid")) {
    return;
  }
  const std::string token =
      tokens_.issue(*account, {kApiAudience}, std::nullopt, nullptr, meta(secret, "name"));
  verbs_.mutate(
      ref,
      [&](json& current) {
        if (meta(current, "uid") != meta(secret, "uid")) return false;
        current["metadata"]["annotations"][kUidAnnotation] = meta(*account, "uid");
        json& filled = current["data"];
        if (!filled.is_object()) filled = json::object();
        if (!filled.contains("token")) filled["token"] = kube::base64_encode(token);
        filled["ca.crt"] = kube::base64_encode(ca_pem_);
        filled["namespace"] = kube::base64_encode(namespace_);
        return true;
      },
      kManager);
}

}  // namespace tessel::testing
