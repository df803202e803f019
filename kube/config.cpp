#include "kube/config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>
#include <vector>

#include "kube/base64.h"

namespace tessel::kube {
namespace {

constexpr const char* kInCluster = "in-cluster";

// Reads a whole file; on failure returns nullopt and sets `error` to the reason.
std::optional<std::string> read_file(const std::string& path, std::string& error) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    error = "is a directory";
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = std::generic_category().message(errno);
    return std::nullopt;
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    error = "read error";
    return std::nullopt;
  }
  return content.str();
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

bool looks_like_pem(const std::string& bytes) {
  return bytes.find("-----BEGIN ") != std::string::npos;
}

bool is_http_url(const std::string& url) {
  for (const std::string_view scheme : {"https://", "http://"}) {
    if (url.starts_with(scheme) && url.size() > scheme.size()) return true;
  }
  return false;
}

// "http://user:pass@proxy:3128" -> "http://***@proxy:3128": URLs may carry credentials.
std::string redact_userinfo(const std::string& url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  const auto authority = scheme_end + 3;
  const auto at = url.find('@', authority);
  if (at == std::string::npos || at > url.find('/', authority)) return url;
  return url.substr(0, authority) + "***" + url.substr(at);
}

std::string getenv_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const auto& part : parts) {
    if (!out.empty()) out += separator;
    out += part;
  }
  return out;
}

std::string field_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// A clusters/users/contexts entry: its name, its body (the cluster/user/context mapping) and
// the body's path in the file for error messages, e.g. "users[1].user".
struct NamedEntry {
  std::string name;
  YAML::Node body;
  std::string path;
};

// Interprets one kubeconfig file. Every error names the file and the field.
class KubeconfigReader {
 public:
  // A kubeconfig file: relative paths in it resolve against its directory.
  explicit KubeconfigReader(std::string path)
      : path_(std::move(path)), directory_(std::filesystem::path(path_).parent_path()) {}
  // A kubeconfig given as bytes, named `source` in errors, read under `policy`.
  KubeconfigReader(std::string source, std::string text, KubeconfigBytesPolicy policy)
      : path_(std::move(source)), text_(std::move(text)), bytes_policy_(policy) {}

  ClusterConfig load(const std::string& context) const {
    const YAML::Node root = parse();
    check_header(root);
    const auto contexts = named_list(root, "contexts", "context");
    const auto clusters = named_list(root, "clusters", "cluster");
    const auto users = named_list(root, "users", "user");

    std::string context_name = context;
    std::string context_field = "contexts";
    if (context_name.empty()) {
      const auto current = string_field(root, "", "current-context");
      if (!current) fail("current-context", "not set and no --context given");
      context_name = *current;
      context_field = "current-context";
    }
    const NamedEntry& chosen = find(contexts, context_name, context_field, "context");

    ClusterConfig config;
    config.name = chosen.name;
    config.source = path_;
    const auto cluster_name = string_field(chosen.body, chosen.path, "cluster");
    if (!cluster_name) fail(field_path(chosen.path, "cluster"), "missing");
    read_cluster(find(clusters, *cluster_name, field_path(chosen.path, "cluster"), "cluster"),
                 config);
    if (const auto user_name = string_field(chosen.body, chosen.path, "user")) {
      read_user(find(users, *user_name, field_path(chosen.path, "user"), "user"), config);
    }
    if (const auto ns = string_field(chosen.body, chosen.path, "namespace")) {
      config.default_namespace = *ns;
    }
    return config;
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    throw KubeConfigError(path_ + ": " + (field.empty() ? "" : field + ": ") + message);
  }

  YAML::Node parse() const {
    std::string error;
    const auto text = bytes_policy_ ? text_ : read_file(path_, error);
    if (!text) fail("", "cannot read kubeconfig: " + error);
    try {
      return YAML::Load(*text);
    } catch (const YAML::ParserException& e) {
      fail("", "line " + std::to_string(e.mark.line + 1) + ", column " +
                   std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
    }
  }

  void check_header(const YAML::Node& root) const {
    if (!root.IsMap() && !root.IsNull()) fail("", "not a kubeconfig (expected a YAML mapping)");
    const auto kind = string_field(root, "", "kind");
    if (kind && *kind != "Config") fail("kind", "expected Config, found '" + *kind + "'");
    const auto api_version = string_field(root, "", "apiVersion");
    if (api_version && *api_version != "v1") {
      fail("apiVersion", "expected v1, found '" + *api_version + "'");
    }
  }

  // A string field; nullopt when absent, null or empty.
  std::optional<std::string> string_field(const YAML::Node& parent, const std::string& parent_path,
                                          const char* key) const {
    if (!parent.IsMap()) return std::nullopt;
    const YAML::Node node = parent[key];
    if (!node || node.IsNull()) return std::nullopt;
    if (!node.IsScalar()) fail(field_path(parent_path, key), "expected a string");
    if (node.Scalar().empty()) return std::nullopt;
    return node.Scalar();
  }

  bool bool_field(const YAML::Node& parent, const std::string& parent_path, const char* key) const {
    const YAML::Node node = parent[key];
    if (!node || node.IsNull()) return false;
    try {
      return node.as<bool>();
    } catch (const YAML::Exception&) {
      fail(field_path(parent_path, key), "expected true or false");
    }
  }

  bool present(const YAML::Node& parent, const char* key) const {
    const YAML::Node node = parent[key];
    return node && !node.IsNull();
  }

  std::vector<NamedEntry> named_list(const YAML::Node& root, const std::string& list_key,
                                     const char* body_key) const {
    std::vector<NamedEntry> entries;
    if (!root.IsMap()) return entries;
    const YAML::Node list = root[list_key];
    if (!list || list.IsNull()) return entries;
    if (!list.IsSequence()) fail(list_key, "expected a list");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string item_path = list_key + "[" + std::to_string(i) + "]";
      const YAML::Node item = list[i];
      if (!item.IsMap()) {
        fail(item_path, std::string("expected a mapping with name and ") + body_key);
      }
      const auto name = string_field(item, item_path, "name");
      if (!name) fail(item_path + ".name", "missing");
      for (const auto& earlier : entries) {
        if (earlier.name == *name) {
          fail(item_path + ".name", "duplicate name '" + *name + "' (also " +
                                        earlier.path.substr(0, earlier.path.rfind('.')) + ")");
        }
      }
      const std::string body_path = item_path + "." + body_key;
      const YAML::Node found = item[body_key];
      if (found && !found.IsNull() && !found.IsMap()) fail(body_path, "expected a mapping");
      // A missing body becomes a null node: yaml-cpp throws on any use of a missing one.
      entries.push_back({*name, found ? found : YAML::Node(), body_path});
    }
    return entries;
  }

  const NamedEntry& find(const std::vector<NamedEntry>& entries, const std::string& name,
                         const std::string& referring_field, const char* what) const {
    std::vector<std::string> known;
    for (const auto& entry : entries) {
      if (entry.name == name) return entry;
      known.push_back(entry.name);
    }
    fail(referring_field, std::string("no ") + what + " named '" + name +
                              "' (known: " + (known.empty() ? "none" : join(known, ", ")) + ")");
  }

  std::string resolve(const std::string& file) const {
    const std::filesystem::path p(file);
    return p.is_absolute() ? file : (directory_ / p).string();
  }

  std::string read_referenced_file(const std::string& field, const std::string& file) const {
    if (bytes_policy_) {
      fail(field, "refers to the file '" + file +
                      "'; a kubeconfig given as bytes must carry "
                      "its credentials and certificates inline (the -data fields, token)");
    }
    const std::string resolved = resolve(file);
    std::string error;
    auto content = read_file(resolved, error);
    if (!content) fail(field, "cannot read '" + resolved + "': " + error);
    return *content;
  }

  // PEM bytes from `<data_key>` (base64) or `<file_key>` (a path); empty when neither is set.
  std::string pem_field(const NamedEntry& entry, const char* data_key, const char* file_key) const {
    const auto data = string_field(entry.body, entry.path, data_key);
    const auto file = string_field(entry.body, entry.path, file_key);
    if (data && file) {
      fail(entry.path,
           std::string(data_key) + " and " + file_key + " are both set; keep one of them");
    }
    const std::string field = field_path(entry.path, data ? data_key : file_key);
    std::string pem;
    if (data) {
      auto decoded = base64_decode(*data);
      if (!decoded) fail(field, "not valid base64");
      pem = std::move(*decoded);
    } else if (file) {
      pem = read_referenced_file(field, *file);
    } else {
      return "";
    }
    if (!looks_like_pem(pem)) fail(field, "not PEM data (no '-----BEGIN' line)");
    return pem;
  }

  void read_cluster(const NamedEntry& cluster, ClusterConfig& config) const {
    const auto server = string_field(cluster.body, cluster.path, "server");
    if (!server) fail(field_path(cluster.path, "server"), "missing");
    if (!is_http_url(*server)) {
      fail(field_path(cluster.path, "server"),
           "'" + redact_userinfo(*server) + "' is not an https:// or http:// URL");
    }
    config.server = *server;
    config.ca_pem = pem_field(cluster, "certificate-authority-data", "certificate-authority");
    config.insecure_skip_tls_verify =
        bool_field(cluster.body, cluster.path, "insecure-skip-tls-verify");
    if (config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
      fail(field_path(cluster.path, "insecure-skip-tls-verify"),
           "cannot be combined with a certificate authority (kubectl refuses it too)");
    }
    if (bytes_policy_ && !bytes_policy_->allow_insecure) {
      if (config.insecure_skip_tls_verify) {
        fail(field_path(cluster.path, "insecure-skip-tls-verify"),
             "refused: the server's identity would not be checked (" +
                 bytes_policy_->allow_insecure_hint + ")");
      }
      if (config.server.rfind("http://", 0) == 0) {
        fail(field_path(cluster.path, "server"), "'" + redact_userinfo(config.server) +
                                                     "' is plain HTTP: refused (" +
                                                     bytes_policy_->allow_insecure_hint + ")");
      }
    }
    config.tls_server_name =
        string_field(cluster.body, cluster.path, "tls-server-name").value_or("");
    config.proxy_url = string_field(cluster.body, cluster.path, "proxy-url").value_or("");
  }

  void refuse_unsupported_auth(const NamedEntry& user) const {
    constexpr const char* kUseInstead =
        "; give this user a token, a tokenFile, or a client certificate and key instead";
    if (present(user.body, "exec")) {
      fail(field_path(user.path, "exec"),
           std::string("tessel does not run credential plugins (exec)") + kUseInstead);
    }
    if (present(user.body, "auth-provider")) {
      fail(field_path(user.path, "auth-provider"),
           std::string("tessel does not run auth-provider plugins") + kUseInstead);
    }
    for (const char* key : {"username", "password"}) {
      if (present(user.body, key)) {
        fail(field_path(user.path, key),
             std::string("basic authentication is deprecated and not supported") + kUseInstead);
      }
    }
    for (const char* key : {"as", "as-uid", "as-groups", "as-user-extra"}) {
      if (present(user.body, key)) {
        fail(field_path(user.path, key), "impersonation is not supported");
      }
    }
  }

  void read_user(const NamedEntry& user, ClusterConfig& config) const {
    if (!user.body.IsMap()) return;  // an empty user: anonymous
    refuse_unsupported_auth(user);
    config.client_cert_pem = pem_field(user, "client-certificate-data", "client-certificate");
    config.client_key_pem = pem_field(user, "client-key-data", "client-key");
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      fail(user.path, config.client_key_pem.empty()
                          ? "client certificate set without client-key-data or client-key"
                          : "client key set without client-certificate-data or client-certificate");
    }
    config.token = string_field(user.body, user.path, "token").value_or("");
    // As in client-go, a token file takes precedence over an inline token.
    if (const auto token_file = string_field(user.body, user.path, "tokenFile")) {
      const std::string field = field_path(user.path, "tokenFile");
      config.token_file = resolve(*token_file);
      config.token = trim(read_referenced_file(field, *token_file));
      if (config.token.empty()) fail(field, "'" + config.token_file + "' is empty");
    }
  }

  const std::string path_;
  const std::filesystem::path directory_;
  const std::optional<std::string> text_;                    // set for bytes
  const std::optional<KubeconfigBytesPolicy> bytes_policy_;  // set for bytes
};

std::string bracket_ipv6(const std::string& host) {
  return host.find(':') != std::string::npos && !host.starts_with('[') ? "[" + host + "]" : host;
}

[[noreturn]] void fail_in_cluster(const std::string& message) {
  throw KubeConfigError("in-cluster config: " + message);
}

bool is_port(const std::string& port) {
  return !port.empty() && port.size() <= 5 &&
         port.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

std::string describe(const ClusterConfig& config) {
  std::vector<std::string> parts = {"server " + redact_userinfo(config.server),
                                    "namespace " + config.default_namespace};
  parts.push_back(config.ca_pem.empty() ? "CA: system trust store"
                                        : "CA: " + std::to_string(config.ca_pem.size()) + " bytes");
  if (config.insecure_skip_tls_verify) parts.push_back("insecure-skip-tls-verify");
  if (!config.tls_server_name.empty()) parts.push_back("tls-server-name " + config.tls_server_name);
  if (!config.proxy_url.empty()) parts.push_back("proxy " + redact_userinfo(config.proxy_url));
  if (!config.client_cert_pem.empty()) parts.push_back("client certificate: set");
  if (!config.client_key_pem.empty()) parts.push_back("client key: set");
  if (!config.token_file.empty()) {
    parts.push_back("token: from file " + config.token_file);
  } else if (!config.token.empty()) {
    parts.push_back("token: set");
  }
  if (config.client_key_pem.empty() && config.token.empty() && config.token_file.empty()) {
    parts.push_back("credentials: none");
  }
  return "context '" + config.name + "' (" + config.source + "): " + join(parts, ", ");
}

ClusterConfig load_kubeconfig(const std::string& path, const std::string& context) {
  return KubeconfigReader(path).load(context);
}

ClusterConfig kubeconfig_from_bytes(const std::string& text, const std::string& source,
                                    const KubeconfigBytesPolicy& policy,
                                    const std::string& context) {
  if (text.size() > kMaxKubeconfigBytes) {
    throw KubeConfigError(source + ": " + std::to_string(text.size()) +
                          " bytes, more than the limit of " + std::to_string(kMaxKubeconfigBytes));
  }
  return KubeconfigReader(source, text, policy).load(context);
}

ClusterConfig in_cluster_config(const InClusterPaths& paths) {
  const std::string host =
      paths.host.empty() ? getenv_or_empty("KUBERNETES_SERVICE_HOST") : paths.host;
  if (host.empty()) fail_in_cluster("KUBERNETES_SERVICE_HOST is not set (not running in a pod?)");
  const std::string port =
      paths.port.empty() ? getenv_or_empty("KUBERNETES_SERVICE_PORT") : paths.port;
  if (port.empty()) fail_in_cluster("KUBERNETES_SERVICE_PORT is not set");
  if (!is_port(port)) {
    fail_in_cluster("KUBERNETES_SERVICE_PORT: '" + port + "' is not a port number");
  }

  const std::filesystem::path directory(paths.directory);
  ClusterConfig config;
  config.name = kInCluster;
  config.source = kInCluster;
  config.server = "https://" + bracket_ipv6(host) + ":" + port;

  std::string error;
  config.token_file = (directory / "token").string();
  const auto token = read_file(config.token_file, error);
  if (!token) {
    fail_in_cluster("cannot read service-account token '" + config.token_file + "': " + error);
  }
  config.token = trim(*token);
  if (config.token.empty()) {
    fail_in_cluster("service-account token '" + config.token_file + "' is empty");
  }

  const std::string ca_file = (directory / "ca.crt").string();
  const auto ca = read_file(ca_file, error);
  if (!ca) fail_in_cluster("cannot read CA bundle '" + ca_file + "': " + error);
  if (!looks_like_pem(*ca)) fail_in_cluster("CA bundle '" + ca_file + "' is not PEM data");
  config.ca_pem = *ca;

  // client-go falls back to "default" when the namespace file is absent.
  if (const auto ns = read_file((directory / "namespace").string(), error)) {
    if (!trim(*ns).empty()) config.default_namespace = trim(*ns);
  }
  return config;
}

ClusterConfig load_default_config(const std::string& explicit_path, const std::string& context,
                                  const InClusterPaths& in_cluster) {
  if (!explicit_path.empty()) return load_kubeconfig(explicit_path, context);

  std::vector<std::string> tried;
  const auto exists = [](const std::string& path) {
    std::error_code ec;
    return std::filesystem::exists(path, ec);
  };
  const std::string kubeconfig_env = getenv_or_empty("KUBECONFIG");
  if (kubeconfig_env.empty()) {
    tried.push_back("$KUBECONFIG (not set)");
  } else {
    std::istringstream list(kubeconfig_env);
    for (std::string path; std::getline(list, path, ':');) {
      if (path.empty()) continue;
      if (exists(path)) return load_kubeconfig(path, context);
      tried.push_back("$KUBECONFIG entry " + path + " (does not exist)");
    }
  }

  const std::string home = getenv_or_empty("HOME");
  if (home.empty()) {
    tried.push_back("~/.kube/config ($HOME not set)");
  } else {
    const std::string path = (std::filesystem::path(home) / ".kube" / "config").string();
    if (exists(path)) return load_kubeconfig(path, context);
    tried.push_back(path + " (does not exist)");
  }

  if (!context.empty()) {
    tried.push_back("in-cluster config (not used: context '" + context + "' was asked for)");
  } else if (in_cluster.host.empty() && getenv_or_empty("KUBERNETES_SERVICE_HOST").empty()) {
    tried.push_back("in-cluster config (KUBERNETES_SERVICE_HOST not set)");
  } else {
    return in_cluster_config(in_cluster);
  }
  throw KubeConfigError("no Kubernetes configuration found; tried " + join(tried, "; "));
}

BearerToken::BearerToken(const ClusterConfig& config, std::chrono::steady_clock::duration max_age)
    : file_(config.token_file), max_age_(max_age), token_(config.token) {
  if (!file_.empty()) {
    token_ = read_token_file(version_);
    read_at_ = std::chrono::steady_clock::now();
  }
}

std::string BearerToken::current() {
  std::lock_guard lock(mutex_);
  if (file_.empty()) return token_;
  const auto now = std::chrono::steady_clock::now();
  if (stat_file() == version_ && now - read_at_ < max_age_) return token_;
  try {
    FileVersion version;
    token_ = read_token_file(version);
    version_ = version;
  } catch (const KubeConfigError&) {
    // Keep the last token read: the kubelet replaces the file atomically, so a failed read is
    // transient, and the old token stays valid for a while after rotation.
  }
  read_at_ = now;
  return token_;
}

std::optional<BearerToken::FileVersion> BearerToken::stat_file() const {
  struct stat info {};
  if (::stat(file_.c_str(), &info) != 0) return std::nullopt;
  return FileVersion{info.st_mtim.tv_sec * 1'000'000'000LL + info.st_mtim.tv_nsec, info.st_size,
                     info.st_ino};
}

std::string BearerToken::read_token_file(FileVersion& version) const {
  const auto seen = stat_file();
  if (!seen)
    throw KubeConfigError("token file '" + file_ + "': " + std::generic_category().message(errno));
  std::string error;
  const auto content = read_file(file_, error);
  if (!content) throw KubeConfigError("token file '" + file_ + "': " + error);
  std::string token = trim(*content);
  if (token.empty()) throw KubeConfigError("token file '" + file_ + "' is empty");
  version = *seen;
  return token;
}

}  // namespace tessel::kube
