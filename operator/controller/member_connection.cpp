#include "operator/controller/member_connection.h"

#include "kube/base64.h"

namespace tessel::controller {

using nlohmann::json;

MemberConnection member_connection(const json& member, const json* secret,
                                   const std::string& secret_namespace) {
  const json spec = member.value("spec", json::object());
  const json ref = spec.value("kubeconfigSecretRef", json::object());
  const std::string name = ref.value("name", "");
  const std::string key = ref.value("key", "kubeconfig");
  const std::string where = "Secret " + secret_namespace + "/" + name;
  MemberConnection out;
  const auto refuse = [&](const char* reason, const std::string& message) {
    out.reachable = {"Reachable", "False", reason, message};
    return out;
  };
  if (!secret) {
    return refuse("SecretNotFound", where + " (spec.kubeconfigSecretRef) does not exist");
  }
  const json data = secret->value("data", json::object());
  if (!data.is_object() || !data.contains(key) || !data[key].is_string()) {
    return refuse("KubeconfigMissing",
                  where + " has no key '" + key + "' (spec.kubeconfigSecretRef.key)");
  }
  const std::optional<std::string> text = kube::base64_decode(data[key].get<std::string>());
  if (!text) return refuse("KubeconfigInvalid", where + "[" + key + "]: not valid base64");
  kube::KubeconfigBytesPolicy policy;
  policy.allow_insecure = spec.value("allowInsecureTLS", false);
  policy.allow_insecure_hint = "set spec.allowInsecureTLS on the MemberCluster to accept it";
  try {
    out.config = kube::kubeconfig_from_bytes(*text, where + "[" + key + "]", policy);
  } catch (const kube::KubeConfigError& e) {
    return refuse("KubeconfigInvalid", e.what());
  }
  out.reachable = {"Reachable", "Unknown", "Connecting",
                   "connecting to " + out.config->server + " with " + where + "[" + key + "]"};
  return out;
}

}  // namespace tessel::controller
