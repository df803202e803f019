// Kubeconfigs given as bytes, as a MemberCluster's Secret holds them: inline credentials work;
// plugins, file references and unverified TLS are refused with the source and field named.
#include <gtest/gtest.h>

#include <string>

#include "kube/base64.h"
#include "kube/config.h"

namespace tessel::kube {
namespace {

const std::string kPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const std::string kSource = "Secret tessel-system/member-a-kubeconfig[kubeconfig]";

// A kubeconfig whose cluster and user bodies are given (YAML flow mappings).
std::string kubeconfig(const std::string& cluster, const std::string& user) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
         "contexts: [{name: a, context: {cluster: c, user: u, namespace: ml}}]\n"
         "clusters: [{name: c, cluster: " +
         cluster + "}]\nusers: [{name: u, user: " + user + "}]\n";
}

const std::string kSecureCluster =
    "{server: 'https://10.0.0.1:6443', certificate-authority-data: " + base64_encode(kPem) + "}";

std::string error_of(const std::string& text, bool allow_insecure = false) {
  KubeconfigBytesPolicy policy;
  policy.allow_insecure = allow_insecure;
  policy.allow_insecure_hint = "set spec.allowInsecureTLS on the MemberCluster to accept it";
  try {
    kubeconfig_from_bytes(text, kSource, policy);
  } catch (const KubeConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(KubeconfigBytes, InlineCredentialsAreRead) {
  const ClusterConfig config =
      kubeconfig_from_bytes(kubeconfig(kSecureCluster, "{token: abc}"), kSource, {});
  EXPECT_EQ(config.server, "https://10.0.0.1:6443");
  EXPECT_EQ(config.ca_pem, kPem);
  EXPECT_EQ(config.token, "abc");
  EXPECT_EQ(config.default_namespace, "ml");
  EXPECT_EQ(config.source, kSource);
  const ClusterConfig certs = kubeconfig_from_bytes(
      kubeconfig(kSecureCluster, "{client-certificate-data: " + base64_encode(kPem) +
                                     ", client-key-data: " + base64_encode(kPem) + "}"),
      kSource, {});
  EXPECT_EQ(certs.client_cert_pem, kPem);
}

TEST(KubeconfigBytes, HostileKubeconfigsAreRefusedNamingTheField) {
  const std::string at = kSource + ": ";
  EXPECT_EQ(error_of(kubeconfig(kSecureCluster, "{exec: {command: /bin/sh}}")),
            at + "users[0].user.exec: tessel does not run credential plugins (exec); give this "
                 "user a token, a tokenFile, or a client certificate and key instead");
  EXPECT_NE(error_of(kubeconfig(kSecureCluster, "{auth-provider: {name: gcp}}"))
                .find(at + "users[0].user.auth-provider: "),
            std::string::npos);
  EXPECT_EQ(error_of(kubeconfig(kSecureCluster, "{tokenFile: /var/run/secrets/token}")),
            at + "users[0].user.tokenFile: refers to the file '/var/run/secrets/token'; a "
                 "kubeconfig given as bytes must carry its credentials and certificates inline "
                 "(the -data fields, token)");
  EXPECT_NE(error_of(kubeconfig("{server: 'https://h:6443', certificate-authority: /etc/ca.crt}",
                                "{token: t}"))
                .find(at + "clusters[0].cluster.certificate-authority: refers to the file"),
            std::string::npos);
  EXPECT_NE(error_of(kubeconfig(kSecureCluster,
                                "{client-certificate: /root/c.crt, client-key: /root/c.key}"))
                .find(at + "users[0].user.client-certificate: refers to the file"),
            std::string::npos);
  EXPECT_EQ(error_of(kubeconfig("{server: 'https://h:6443', insecure-skip-tls-verify: true}",
                                "{token: t}")),
            at + "clusters[0].cluster.insecure-skip-tls-verify: refused: the server's identity "
                 "would not be checked (set spec.allowInsecureTLS on the MemberCluster to "
                 "accept it)");
  EXPECT_EQ(error_of(kubeconfig("{server: 'http://h:8080'}", "{token: t}")),
            at + "clusters[0].cluster.server: 'http://h:8080' is plain HTTP: refused (set "
                 "spec.allowInsecureTLS on the MemberCluster to accept it)");
  EXPECT_NE(error_of(kubeconfig(kSecureCluster, "{username: a, password: b}"))
                .find("basic authentication"),
            std::string::npos);
  EXPECT_NE(error_of(kubeconfig(kSecureCluster, "{token: t, as: admin}")).find("impersonation"),
            std::string::npos);
  EXPECT_NE(error_of("clusters: [unclosed").find(at + "line "), std::string::npos);
  EXPECT_EQ(error_of(std::string(2 << 20, '#')),
            kSource + ": 2097152 bytes, more than the limit of 1048576");
  EXPECT_NE(error_of("apiVersion: v1\nkind: Config\n").find("current-context: not set"),
            std::string::npos);
}

TEST(KubeconfigBytes, InsecureTlsOnlyWhenAllowed) {
  EXPECT_EQ(error_of(kubeconfig("{server: 'https://h:6443', insecure-skip-tls-verify: true}",
                                "{token: t}"),
                     true),
            "(accepted)");
  EXPECT_EQ(error_of(kubeconfig("{server: 'http://h:8080'}", "{token: t}"), true), "(accepted)");
}

}  // namespace
}  // namespace tessel::kube
