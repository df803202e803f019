// A MemberCluster's kubeconfig Secret: a usable one gives the member's config; every bad or
// hostile one gives Reachable False with a reason and a message naming the Secret and field.
#include "operator/controller/member_connection.h"

#include <gtest/gtest.h>

#include "kube/base64.h"

namespace tessel::controller {
namespace {

using nlohmann::json;

const std::string kCa = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

json member(bool allow_insecure = false, const std::string& key = "") {
  json spec = {{"kubeconfigSecretRef", {{"name", "member-a-kubeconfig"}}},
               {"allowInsecureTLS", allow_insecure}};
  if (!key.empty()) spec["kubeconfigSecretRef"]["key"] = key;
  return {{"apiVersion", "tessel.dev/v1alpha1"},
          {"kind", "MemberCluster"},
          {"metadata", {{"name", "member-a"}}},
          {"spec", spec}};
}

std::string kubeconfig(const std::string& cluster, const std::string& user) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
         "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
         "clusters: [{name: c, cluster: " +
         cluster + "}]\nusers: [{name: u, user: " + user + "}]\n";
}

const std::string kCluster =
    "{server: 'https://member-a:6443', certificate-authority-data: " + kube::base64_encode(kCa) +
    "}";

json secret(const std::string& text, const std::string& key = "kubeconfig") {
  return {{"metadata", {{"name", "member-a-kubeconfig"}, {"namespace", "tessel-system"}}},
          {"data", {{key, kube::base64_encode(text)}}}};
}

TEST(MemberConnection, AUsableKubeconfigConnects) {
  const json s = secret(kubeconfig(kCluster, "{token: abc}"));
  const MemberConnection c = member_connection(member(), &s, "tessel-system");
  ASSERT_TRUE(c.config);
  EXPECT_EQ(c.config->server, "https://member-a:6443");
  EXPECT_EQ(c.reachable.status, "Unknown");
  EXPECT_EQ(c.reachable.reason, "Connecting");
}

struct Bad {
  const char* name;
  json member;
  std::optional<json> secret;
  const char* reason;
  const char* words;
};

TEST(MemberConnection, BadAndHostileKubeconfigsAreFlagged) {
  const std::vector<Bad> cases = {
      {"no secret", member(), std::nullopt, "SecretNotFound",
       "Secret tessel-system/member-a-kubeconfig (spec.kubeconfigSecretRef) does not exist"},
      {"another key", member(false, "config"), secret(kubeconfig(kCluster, "{token: t}")),
       "KubeconfigMissing", "has no key 'config' (spec.kubeconfigSecretRef.key)"},
      {"not base64", member(), json{{"data", {{"kubeconfig", "%%%not-base64%%%"}}}},
       "KubeconfigInvalid", "[kubeconfig]: not valid base64"},
      {"not yaml", member(), secret("clusters: [unclosed"), "KubeconfigInvalid", "line "},
      {"exec plugin", member(), secret(kubeconfig(kCluster, "{exec: {command: aws}}")),
       "KubeconfigInvalid", "users[0].user.exec: tessel does not run credential plugins"},
      {"auth provider", member(), secret(kubeconfig(kCluster, "{auth-provider: {name: oidc}}")),
       "KubeconfigInvalid", "users[0].user.auth-provider"},
      {"token file", member(), secret(kubeconfig(kCluster, "{tokenFile: /etc/shadow}")),
       "KubeconfigInvalid", "users[0].user.tokenFile: refers to the file '/etc/shadow'"},
      {"ca file", member(),
       secret(kubeconfig("{server: 'https://m:6443', certificate-authority: /etc/ca.pem}",
                         "{token: t}")),
       "KubeconfigInvalid", "clusters[0].cluster.certificate-authority: refers to the file"},
      {"insecure not allowed", member(),
       secret(
           kubeconfig("{server: 'https://m:6443', insecure-skip-tls-verify: true}", "{token: t}")),
       "KubeconfigInvalid", "set spec.allowInsecureTLS on the MemberCluster to accept it"},
      {"plain http", member(), secret(kubeconfig("{server: 'http://m:8080'}", "{token: t}")),
       "KubeconfigInvalid", "is plain HTTP: refused"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.name);
    const MemberConnection m =
        member_connection(c.member, c.secret ? &*c.secret : nullptr, "tessel-system");
    EXPECT_FALSE(m.config);
    EXPECT_EQ(m.reachable.type, "Reachable");
    EXPECT_EQ(m.reachable.status, "False");
    EXPECT_EQ(m.reachable.reason, c.reason);
    EXPECT_NE(m.reachable.message.find(c.words), std::string::npos) << m.reachable.message;
  }
}

TEST(MemberConnection, InsecureTlsWhenTheMemberAllowsIt) {
  const json s = secret(
      kubeconfig("{server: 'https://m:6443', insecure-skip-tls-verify: true}", "{token: t}"));
  const MemberConnection c = member_connection(member(true), &s, "tessel-system");
  ASSERT_TRUE(c.config);
  EXPECT_TRUE(c.config->insecure_skip_tls_verify);
}

}  // namespace
}  // namespace tessel::controller
