#include "kube/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kube/base64.h"

namespace tessel::kube {
namespace {

namespace fs = std::filesystem;

// Stand-ins for credentials; the tests look for these bytes in describe() output.
const std::string kCaPem =
    "-----BEGIN CERTIFICATE-----\nQ0EtYnl0ZXMtN2Q0\n-----END CERTIFICATE-----\n";
const std::string kCertPem =
    "-----BEGIN CERTIFICATE-----\nQ0xJRU5ULUNFUlQtOWEy\n-----END CERTIFICATE-----\n";
const std::string kKeyPem =
    "-----BEGIN PRIVATE KEY-----\nUFJJVkFURS1LRVktZThmMQ\n-----END PRIVATE KEY-----\n";
const std::string kToken = "s3cr3t-token-4b1d";

void write_file(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

// Sets (or with nullopt unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_, value->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

class KubeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("tessel_kubeconfig_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `content` under the test directory and returns its path.
  std::string write(const std::string& relative, const std::string& content) {
    write_file(dir_ / relative, content);
    return (dir_ / relative).string();
  }

  // The message of the KubeConfigError that loading `yaml` throws; fails the test if none.
  std::string load_error(const std::string& yaml, const std::string& context = "") {
    const std::string path = write("kubeconfig", yaml);
    try {
      load_kubeconfig(path, context);
    } catch (const KubeConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for:\n" << yaml;
    return "";
  }

  // Two clusters, users and contexts: "prod" with inline data, "lab" with files referenced
  // relative to the kubeconfig (and one absolute), plus the extensions and preferences real
  // kubeconfigs carry.
  std::string write_realistic_kubeconfig() {
    write("kube/certs/lab-ca.pem", kCaPem);
    write("kube/certs/ci.crt", kCertPem);
    const std::string key_path = write("keys/ci.key", kKeyPem);
    write("kube/secrets/token", kToken + "\n");
    return write("kube/config", R"(apiVersion: v1
kind: Config
preferences: {}
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: )" + base64_encode(kCaPem) +
                                    R"(
    tls-server-name: api.prod.internal
    proxy-url: http://proxy.corp:3128
    extensions:
    - name: example.com/extension
      extension: {audience: prod}
- name: lab
  cluster:
    server: https://[fd00::1]:6443
    certificate-authority: certs/lab-ca.pem
users:
- name: prod-admin
  user:
    client-certificate-data: )" + base64_encode(kCertPem) +
                                    R"(
    client-key-data: )" + base64_encode(kKeyPem) +
                                    R"(
- name: lab-ci
  user:
    tokenFile: secrets/token
    client-certificate: certs/ci.crt
    client-key: )" + key_path + R"(
contexts:
- name: prod
  context: {cluster: prod, user: prod-admin, namespace: training}
- name: lab
  context:
    cluster: lab
    user: lab-ci
current-context: prod
)");
  }

  fs::path dir_;
};

TEST_F(KubeConfigTest, LoadsCurrentContextWithInlineData) {
  const std::string path = write_realistic_kubeconfig();
  const ClusterConfig config = load_kubeconfig(path);
  EXPECT_EQ(config.name, "prod");
  EXPECT_EQ(config.source, path);
  EXPECT_EQ(config.server, "https://10.0.0.1:6443");
  EXPECT_EQ(config.ca_pem, kCaPem);
  EXPECT_FALSE(config.insecure_skip_tls_verify);
  EXPECT_EQ(config.tls_server_name, "api.prod.internal");
  EXPECT_EQ(config.proxy_url, "http://proxy.corp:3128");
  EXPECT_EQ(config.client_cert_pem, kCertPem);
  EXPECT_EQ(config.client_key_pem, kKeyPem);
  EXPECT_EQ(config.token, "");
  EXPECT_EQ(config.token_file, "");
  EXPECT_EQ(config.default_namespace, "training");
}

TEST_F(KubeConfigTest, LoadsExplicitContextWithFilesRelativeToTheKubeconfig) {
  const std::string path = write_realistic_kubeconfig();
  const ClusterConfig config = load_kubeconfig(path, "lab");
  EXPECT_EQ(config.name, "lab");
  EXPECT_EQ(config.server, "https://[fd00::1]:6443");
  EXPECT_EQ(config.ca_pem, kCaPem);
  EXPECT_EQ(config.client_cert_pem, kCertPem);
  EXPECT_EQ(config.client_key_pem, kKeyPem);
  EXPECT_EQ(config.token, kToken);  // trailing newline trimmed
  EXPECT_EQ(config.token_file, (dir_ / "kube/secrets/token").string());
  EXPECT_EQ(config.tls_server_name, "");
  EXPECT_EQ(config.proxy_url, "");
  EXPECT_EQ(config.default_namespace, "default");
}

TEST_F(KubeConfigTest, InsecureSkipTlsVerifyOnlyWhenTheFileSaysSo) {
  const std::string path = write("kubeconfig", R"(
clusters:
- {name: a, cluster: {server: "https://a:6443", insecure-skip-tls-verify: true}}
- {name: b, cluster: {server: "https://b:6443", insecure-skip-tls-verify: false}}
- {name: c, cluster: {server: "https://c:6443"}}
contexts:
- {name: a, context: {cluster: a}}
- {name: b, context: {cluster: b}}
- {name: c, context: {cluster: c}}
)");
  EXPECT_TRUE(load_kubeconfig(path, "a").insecure_skip_tls_verify);
  EXPECT_FALSE(load_kubeconfig(path, "b").insecure_skip_tls_verify);
  EXPECT_FALSE(load_kubeconfig(path, "c").insecure_skip_tls_verify);
}

TEST_F(KubeConfigTest, InlineTokenAndAnonymousUser) {
  const std::string path = write("kubeconfig", R"(
clusters: [{name: local, cluster: {server: "http://127.0.0.1:8080"}}]
users: [{name: bot, user: {token: )" + kToken + R"(}}]
contexts:
- {name: with-token, context: {cluster: local, user: bot, namespace: ci}}
- {name: anonymous, context: {cluster: local}}
)");
  const ClusterConfig with_token = load_kubeconfig(path, "with-token");
  EXPECT_EQ(with_token.server, "http://127.0.0.1:8080");
  EXPECT_EQ(with_token.token, kToken);
  EXPECT_EQ(with_token.token_file, "");
  EXPECT_EQ(with_token.default_namespace, "ci");
  const ClusterConfig anonymous = load_kubeconfig(path, "anonymous");
  EXPECT_EQ(anonymous.token, "");
  EXPECT_EQ(anonymous.client_key_pem, "");
}

TEST_F(KubeConfigTest, RefusedUsersElsewhereDoNotBlockOtherContexts) {
  const std::string path = write("kubeconfig", R"(
clusters: [{name: c, cluster: {server: "https://c:6443"}}]
users:
- name: eks
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws}
- {name: bot, user: {token: abc}}
contexts:
- {name: eks, context: {cluster: c, user: eks}}
- {name: bot, context: {cluster: c, user: bot}}
current-context: eks
)");
  EXPECT_EQ(load_kubeconfig(path, "bot").token, "abc");
  EXPECT_THROW(load_kubeconfig(path), KubeConfigError);
}

TEST_F(KubeConfigTest, ErrorsNameTheFileAndTheField) {
  write("ca.pem", kCaPem);
  write("empty-token", "\n");
  const std::string bad_pem = base64_encode("not a certificate");
  const std::string cluster = R"(clusters: [{name: c, cluster: {server: "https://c:6443"}}]
)";
  const std::string context = R"(contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
)";
  // A kubeconfig whose only user is `user`.
  const auto with_user = [&](const std::string& user) {
    return cluster + context + "users: [{name: u, user: " + user + "}]\n";
  };
  // A kubeconfig whose only cluster is `body`.
  const auto with_cluster = [&](const std::string& body) {
    return "clusters: [{name: c, cluster: " + body + "}]\n" +
           "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n";
  };
  struct Case {
    std::string yaml;
    std::string context;
    std::string expected;  // after "<file>: "
  };
  const std::vector<Case> cases = {
      {"clusters: [\n  {name: c,\n   cluster: {server: ]\n", "",
       "line 3, column 22: YAML syntax error"},
      {"- just\n- a list\n", "", "not a kubeconfig (expected a YAML mapping)"},
      {"kind: Pod\n", "", "kind: expected Config, found 'Pod'"},
      {"apiVersion: v2\n", "", "apiVersion: expected v1, found 'v2'"},
      {cluster + "contexts: [{name: a, context: {cluster: c}}]\n", "",
       "current-context: not set and no --context given"},
      {cluster + "contexts: [{name: a, context: {cluster: c}}, {name: b, context: {cluster: c}}]\n",
       "prod", "contexts: no context named 'prod' (known: a, b)"},
      {cluster + "contexts: [{name: a, context: {cluster: c}}]\ncurrent-context: gone\n", "",
       "current-context: no context named 'gone' (known: a)"},
      {cluster + "contexts: {a: b}\n", "a", "contexts: expected a list"},
      {cluster + "contexts: [{context: {cluster: c}}]\n", "a", "contexts[0].name: missing"},
      {cluster + "contexts: [{name: a}]\n", "a", "contexts[0].context.cluster: missing"},
      {cluster + "contexts: [{name: a, context: {cluster: nope}}]\n", "a",
       "contexts[0].context.cluster: no cluster named 'nope' (known: c)"},
      {cluster + "contexts: [{name: a, context: {cluster: c, user: nobody}}]\n", "a",
       "contexts[0].context.user: no user named 'nobody' (known: none)"},
      {"clusters: [{name: c, cluster: {server: 'https://c'}}, {name: c, cluster: {}}]\n", "a",
       "clusters[1].name: duplicate name 'c' (also clusters[0])"},
      {"clusters: [{name: a, cluster: {server: 'https://a'}}, {name: c, cluster: {}}]\n" + context,
       "", "clusters[1].cluster.server: missing"},
      {with_cluster("{server: 'localhost:6443'}"), "",
       "clusters[0].cluster.server: 'localhost:6443' is not an https:// or http:// URL"},
      {with_cluster("{server: {host: a}}"), "", "clusters[0].cluster.server: expected a string"},
      {with_cluster("{server: 'https://c', certificate-authority: nope.pem}"), "",
       "clusters[0].cluster.certificate-authority: cannot read '" + (dir_ / "nope.pem").string() +
           "': No such file or directory"},
      {with_cluster("{server: 'https://c', certificate-authority-data: 'Q0E'}"), "",
       "clusters[0].cluster.certificate-authority-data: not valid base64"},
      {with_cluster("{server: 'https://c', certificate-authority-data: " + bad_pem + "}"), "",
       "clusters[0].cluster.certificate-authority-data: not PEM data"},
      {with_cluster("{server: 'https://c', certificate-authority: ca.pem, "
                    "certificate-authority-data: " +
                    base64_encode(kCaPem) + "}"),
       "",
       "clusters[0].cluster: certificate-authority-data and certificate-authority are both set"},
      {with_cluster("{server: 'https://c', certificate-authority: ca.pem, "
                    "insecure-skip-tls-verify: true}"),
       "", "clusters[0].cluster.insecure-skip-tls-verify: cannot be combined with a certificate"},
      {with_cluster("{server: 'https://c', insecure-skip-tls-verify: maybe}"), "",
       "clusters[0].cluster.insecure-skip-tls-verify: expected true or false"},
      {with_user("{client-certificate-data: " + base64_encode(kCertPem) +
                 ", client-key-data: '!!notbase64'}"),
       "", "users[0].user.client-key-data: not valid base64"},
      {with_user("{client-certificate-data: " + base64_encode(kCertPem) + "}"), "",
       "users[0].user: client certificate set without client-key-data or client-key"},
      {with_user("{client-key: ca.pem}"), "",
       "users[0].user: client key set without client-certificate-data or client-certificate"},
      {with_user("{exec: {command: gke-gcloud-auth-plugin}}"), "",
       "users[0].user.exec: tessel does not run credential plugins (exec); give this user a token"},
      {with_user("{auth-provider: {name: oidc}}"), "",
       "users[0].user.auth-provider: tessel does not run auth-provider plugins; give this user a "
       "token"},
      {with_user("{username: admin, password: hunter2}"), "",
       "users[0].user.username: basic authentication is deprecated and not supported"},
      {with_user("{token: abc, as: admin}"), "",
       "users[0].user.as: impersonation is not supported"},
      {with_user("{tokenFile: missing-token}"), "",
       "users[0].user.tokenFile: cannot read '" + (dir_ / "missing-token").string() + "'"},
      {with_user("{tokenFile: empty-token}"), "",
       "users[0].user.tokenFile: '" + (dir_ / "empty-token").string() + "' is empty"},
  };
  const std::string path = (dir_ / "kubeconfig").string();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.yaml);
    const std::string message = load_error(c.yaml, c.context);
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(path + ": " + c.expected), std::string::npos) << message;
    EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  }
}

TEST_F(KubeConfigTest, MissingFileIsAnError) {
  const std::string path = (dir_ / "absent").string();
  try {
    load_kubeconfig(path);
    FAIL() << "no error";
  } catch (const KubeConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot read kubeconfig: No such file or directory");
  }
}

TEST_F(KubeConfigTest, DescribeNeverShowsCredentials) {
  const std::string path = write_realistic_kubeconfig();
  ClusterConfig with_token = load_kubeconfig(path, "prod");
  with_token.token = kToken;
  with_token.proxy_url = "http://user:proxy-pass@proxy.corp:3128";
  const std::vector<ClusterConfig> configs = {load_kubeconfig(path, "prod"),
                                              load_kubeconfig(path, "lab"), with_token};
  for (const ClusterConfig& config : configs) {
    const std::string text = describe(config);
    SCOPED_TRACE(text);
    for (const std::string& secret :
         {kToken, kKeyPem, kCertPem, kCaPem, base64_encode(kKeyPem),
          std::string("UFJJVkFURS1LRVktZThmMQ"), std::string("proxy-pass")}) {
      EXPECT_EQ(text.find(secret), std::string::npos) << secret;
    }
    EXPECT_NE(text.find("client key: set"), std::string::npos);
  }
  EXPECT_NE(describe(configs[0]).find("server https://10.0.0.1:6443"), std::string::npos);
  EXPECT_NE(describe(configs[1]).find("token: from file " + configs[1].token_file),
            std::string::npos);
  EXPECT_NE(describe(with_token).find("token: set"), std::string::npos);
  EXPECT_NE(describe(with_token).find("proxy http://***@proxy.corp:3128"), std::string::npos);
}

class InClusterTest : public KubeConfigTest {
 protected:
  InClusterPaths paths() const { return {"10.96.0.1", "443", dir_.string()}; }
};

TEST_F(InClusterTest, ReadsTheServiceAccountFiles) {
  write("token", kToken + "\n");
  write("ca.crt", kCaPem);
  write("namespace", "training\n");
  const ClusterConfig config = in_cluster_config(paths());
  EXPECT_EQ(config.name, "in-cluster");
  EXPECT_EQ(config.server, "https://10.96.0.1:443");
  EXPECT_EQ(config.token, kToken);
  EXPECT_EQ(config.token_file, (dir_ / "token").string());
  EXPECT_EQ(config.ca_pem, kCaPem);
  EXPECT_EQ(config.default_namespace, "training");
  EXPECT_FALSE(config.insecure_skip_tls_verify);
  EXPECT_EQ(describe(config).find(kToken), std::string::npos);
}

TEST_F(InClusterTest, BracketsIpv6HostsAndDefaultsTheNamespace) {
  write("token", kToken);
  write("ca.crt", kCaPem);
  const ClusterConfig config = in_cluster_config({"fd00:10:96::1", "6443", dir_.string()});
  EXPECT_EQ(config.server, "https://[fd00:10:96::1]:6443");
  EXPECT_EQ(config.default_namespace, "default");
}

TEST_F(InClusterTest, ReadsHostAndPortFromTheEnvironment) {
  write("token", kToken);
  write("ca.crt", kCaPem);
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.0.0.9");
  const ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
  EXPECT_EQ(in_cluster_config({"", "", dir_.string()}).server, "https://10.0.0.9:6443");
}

TEST_F(InClusterTest, ErrorsNameWhatIsMissing) {
  const auto error = [](const InClusterPaths& paths) -> std::string {
    try {
      in_cluster_config(paths);
    } catch (const KubeConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string token = (dir_ / "token").string();
  const std::string ca = (dir_ / "ca.crt").string();
  EXPECT_EQ(error(paths()), "in-cluster config: cannot read service-account token '" + token +
                                "': No such file or directory");
  write("token", "\n");
  EXPECT_EQ(error(paths()), "in-cluster config: service-account token '" + token + "' is empty");
  write("token", kToken);
  EXPECT_EQ(error(paths()),
            "in-cluster config: cannot read CA bundle '" + ca + "': No such file or directory");
  write("ca.crt", "garbage");
  EXPECT_EQ(error(paths()), "in-cluster config: CA bundle '" + ca + "' is not PEM data");
  write("ca.crt", kCaPem);
  EXPECT_EQ(error({"10.96.0.1", "https", dir_.string()}),
            "in-cluster config: KUBERNETES_SERVICE_PORT: 'https' is not a port number");
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", std::nullopt);
  const ScopedEnv port("KUBERNETES_SERVICE_PORT", std::nullopt);
  EXPECT_EQ(error({"", "443", dir_.string()}),
            "in-cluster config: KUBERNETES_SERVICE_HOST is not set (not running in a pod?)");
  EXPECT_EQ(error({"10.96.0.1", "", dir_.string()}),
            "in-cluster config: KUBERNETES_SERVICE_PORT is not set");
}

class BearerTokenTest : public KubeConfigTest {
 protected:
  // Rewrites the token file in place, then sets its modification time to `mtime`.
  void rewrite(const std::string& token, fs::file_time_type mtime) {
    write("token", token);
    fs::last_write_time(dir_ / "token", mtime);
  }
  ClusterConfig config() const {
    ClusterConfig config;
    config.token = "stale-inline";
    config.token_file = (dir_ / "token").string();
    return config;
  }
};

TEST_F(BearerTokenTest, StaticTokenAndNoToken) {
  ClusterConfig config;
  EXPECT_EQ(BearerToken(config).current(), "");
  config.token = kToken;
  EXPECT_EQ(BearerToken(config).current(), kToken);
}

TEST_F(BearerTokenTest, ReReadsWhenTheFileChanges) {
  const auto t0 = fs::file_time_type::clock::now() - std::chrono::hours(1);
  rewrite("one\n", t0);
  BearerToken token(config());
  EXPECT_EQ(token.current(), "one");  // the file wins over the inline token
  rewrite("two\n", t0 + std::chrono::seconds(10));
  EXPECT_EQ(token.current(), "two");
}

TEST_F(BearerTokenTest, ReReadsUnchangedLookingFilesAfterTheMaxAge) {
  const auto t0 = fs::file_time_type::clock::now() - std::chrono::hours(1);
  rewrite("one", t0);
  BearerToken within_period(config());
  BearerToken period_over(config(), std::chrono::seconds(0));
  rewrite("uno", t0);  // same size, inode and modification time
  EXPECT_EQ(within_period.current(), "one");
  EXPECT_EQ(period_over.current(), "uno");
}

TEST_F(BearerTokenTest, KeepsTheLastTokenWhenTheFileIsGoneOrEmpty) {
  const auto t0 = fs::file_time_type::clock::now() - std::chrono::hours(1);
  rewrite("one", t0);
  BearerToken token(config(), std::chrono::seconds(0));
  rewrite("", t0 + std::chrono::seconds(1));
  EXPECT_EQ(token.current(), "one");
  fs::remove(dir_ / "token");
  EXPECT_EQ(token.current(), "one");
  rewrite("two", t0 + std::chrono::seconds(2));
  EXPECT_EQ(token.current(), "two");
}

TEST_F(BearerTokenTest, UnreadableFileAtStartIsAnError) {
  EXPECT_THROW(BearerToken{config()}, KubeConfigError);
  write("token", " \n");
  EXPECT_THROW(BearerToken{config()}, KubeConfigError);
}

TEST_F(BearerTokenTest, ConcurrentReadersSeeWholeTokens) {
  write("token", "token-0");
  BearerToken token(config(), std::chrono::seconds(0));
  std::atomic<bool> done = false;
  std::vector<std::set<std::string>> seen(4);
  std::vector<std::thread> readers;
  for (auto& tokens : seen) {
    readers.emplace_back([&token, &done, &tokens] {
      while (!done) tokens.insert(token.current());
    });
  }
  // Replace the file atomically, as the kubelet's projected volumes do.
  for (int i = 1; i <= 50; ++i) {
    write("token.new", "token-" + std::to_string(i));
    fs::rename(dir_ / "token.new", dir_ / "token");
  }
  done = true;
  for (auto& reader : readers) reader.join();
  EXPECT_EQ(token.current(), "token-50");
  for (const auto& tokens : seen) {
    for (const auto& t : tokens) EXPECT_EQ(t.rfind("token-", 0), 0u) << t;
  }
}

class DefaultConfigTest : public KubeConfigTest {
 protected:
  // A kubeconfig whose only context is named `context_name`.
  std::string write_kubeconfig(const std::string& relative, const std::string& context_name) {
    return write(relative,
                 "clusters: [{name: c, cluster: {server: 'https://c:6443'}}]\n"
                 "contexts: [{name: " +
                     context_name + ", context: {cluster: c}}]\ncurrent-context: " + context_name +
                     "\n");
  }
  void SetUp() override {
    KubeConfigTest::SetUp();
    ::setenv("HOME", home().c_str(), 1);  // home_ restores the real one
  }
  std::string home() const { return (dir_ / "home").string(); }

  ScopedEnv kubeconfig_{"KUBECONFIG", std::nullopt};
  ScopedEnv home_{"HOME", std::nullopt};
  ScopedEnv service_host_{"KUBERNETES_SERVICE_HOST", std::nullopt};
  ScopedEnv service_port_{"KUBERNETES_SERVICE_PORT", std::nullopt};
};

TEST_F(DefaultConfigTest, ExplicitPathBeatsKubeconfigVariable) {
  const std::string explicit_path = write_kubeconfig("explicit", "explicit");
  const ScopedEnv env("KUBECONFIG", write_kubeconfig("from-env", "from-env"));
  EXPECT_EQ(load_default_config(explicit_path).name, "explicit");
}

TEST_F(DefaultConfigTest, FirstExistingFileOfKubeconfigVariableWins) {
  write_kubeconfig("home/.kube/config", "home");
  const std::string first = write_kubeconfig("first", "first");
  const std::string second = write_kubeconfig("second", "second");
  const ScopedEnv env("KUBECONFIG", (dir_ / "missing").string() + "::" + first + ":" + second);
  EXPECT_EQ(load_default_config().name, "first");
}

TEST_F(DefaultConfigTest, HomeKubeConfigWhenTheVariableIsUnsetOrNamesNothing) {
  write_kubeconfig("home/.kube/config", "home");
  EXPECT_EQ(load_default_config().name, "home");
  const ScopedEnv env("KUBECONFIG", (dir_ / "missing").string());
  EXPECT_EQ(load_default_config().name, "home");
}

TEST_F(DefaultConfigTest, ErrorsInAFoundFileAreReported) {
  write("home/.kube/config", "current-context: x\n");
  EXPECT_THROW(load_default_config(), KubeConfigError);
}

TEST_F(DefaultConfigTest, InClusterWhenNoKubeconfigExists) {
  write("sa/token", kToken);
  write("sa/ca.crt", kCaPem);
  const ClusterConfig config =
      load_default_config("", "", {"10.96.0.1", "443", (dir_ / "sa").string()});
  EXPECT_EQ(config.name, "in-cluster");
  EXPECT_EQ(config.token, kToken);
}

TEST_F(DefaultConfigTest, NothingFoundListsWhatWasTried) {
  const std::string missing = (dir_ / "missing").string();
  const ScopedEnv env("KUBECONFIG", missing);
  try {
    load_default_config();
    FAIL() << "no error";
  } catch (const KubeConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "no Kubernetes configuration found; tried $KUBECONFIG entry " + missing +
                  " (does not exist); " + home() +
                  "/.kube/config (does not exist); in-cluster config (KUBERNETES_SERVICE_HOST "
                  "not set)");
  }
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  try {
    load_default_config("", "prod");
    FAIL() << "no error";
  } catch (const KubeConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("in-cluster config (not used: context 'prod' was asked "
                                         "for)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessel::kube
