// Where and how to reach one Kubernetes API server: kubeconfig files (as kubectl reads them),
// in-cluster service-account config, the usual precedence between them, and a bearer token
// that follows a rotating token file.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

namespace tessel::kube {

// A configuration that cannot be used. The message names the file (or environment variable)
// and the field at fault, e.g. "/home/a/.kube/config: users[0].user.client-key-data: not valid
// base64". It never contains a credential.
class KubeConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Everything a REST transport needs to reach one API server. Credential files are read when the
// config is loaded; only the token file is kept by path, because service-account tokens rotate.
struct ClusterConfig {
  std::string name;    // for logs: the context name, or "in-cluster"
  std::string source;  // for logs: the kubeconfig path, or "in-cluster"
  std::string server;  // "https://host:port" or "http://host:port"
  std::string ca_pem;  // CA bundle to verify the server with; empty: the system trust store
  bool insecure_skip_tls_verify = false;  // only when the kubeconfig says so
  std::string tls_server_name;            // SNI and verification name, when not the URL's host
  std::string proxy_url;                  // empty: no proxy
  std::string client_cert_pem;            // client certificate; set together with the key
  std::string client_key_pem;
  std::string token;       // bearer token; when token_file is set, its content at load time
  std::string token_file;  // re-read as it rotates (see BearerToken); empty: none
  std::string default_namespace = "default";  // the context's namespace
};

// A one-line summary for logs: server, namespace, TLS settings, and which credentials are
// present ("token: set", "client key: set"), never their bytes.
std::string describe(const ClusterConfig& config);

// Loads `context` (or the file's current-context when empty) from the kubeconfig at `path`.
// Relative certificate, key and token file paths are resolved against the kubeconfig's
// directory, as kubectl does. Users with exec or auth-provider plugins, basic auth or
// impersonation are refused. Unknown fields are ignored; only the chosen context, cluster and
// user are interpreted, so other entries may use features tessel refuses.
// Throws KubeConfigError.
ClusterConfig load_kubeconfig(const std::string& path, const std::string& context = "");

// How a kubeconfig given as bytes (a member cluster's, from a Secret) is read: it may refer to
// no file (the operator reads no files on a member's behalf), and unverified TLS (skipping
// verification, or plain HTTP) is refused unless allowed. Exec and auth-provider plugins are
// refused as for files.
struct KubeconfigBytesPolicy {
  bool allow_insecure = false;
  // Said when insecure TLS is refused: how to allow it.
  std::string allow_insecure_hint = "allow it explicitly if this is a test cluster";
};

// A Secret holds at most 1 MiB; a kubeconfig is a few KiB.
inline constexpr std::size_t kMaxKubeconfigBytes = 1 << 20;

// Loads `context` (or the current-context when empty) from kubeconfig bytes; `source` names
// them in errors ("Secret tessel-system/member-a-kubeconfig[kubeconfig]"). Throws
// KubeConfigError naming the source and the field.
ClusterConfig kubeconfig_from_bytes(const std::string& text, const std::string& source,
                                    const KubeconfigBytesPolicy& policy,
                                    const std::string& context = "");

inline constexpr const char* kServiceAccountDirectory =
    "/var/run/secrets/kubernetes.io/serviceaccount";

// Where in-cluster config comes from. Tests point these at a temporary directory.
struct InClusterPaths {
  std::string host;                                  // empty: $KUBERNETES_SERVICE_HOST
  std::string port;                                  // empty: $KUBERNETES_SERVICE_PORT
  std::string directory = kServiceAccountDirectory;  // holds token, ca.crt, namespace
};

// The config of a pod's service account: the API server from the service environment
// variables (an IPv6 host is bracketed), the token file (kept for rotation), the CA bundle,
// and the namespace file (absent: "default"). Throws KubeConfigError naming what is missing.
ClusterConfig in_cluster_config(const InClusterPaths& paths = {});

// kubectl's precedence: `explicit_path` when given; else the first existing file named by
// $KUBECONFIG (a colon-separated list; files are not merged, the first existing one wins); else
// ~/.kube/config; else in-cluster config, unless a `context` was asked for (contexts exist only
// in kubeconfig files). Errors in a file that was found are reported, not skipped. When nothing
// is found, the KubeConfigError lists every place tried.
ClusterConfig load_default_config(const std::string& explicit_path = "",
                                  const std::string& context = "",
                                  const InClusterPaths& in_cluster = {});

// How often BearerToken re-reads a token file whose metadata looks unchanged (client-go's
// period for projected service-account tokens).
inline constexpr std::chrono::seconds kTokenReReadPeriod{60};

// The bearer token to send, following a token file as the kubelet rotates it: the file is
// re-read when its modification time, size or inode change, and at least every `max_age`.
// A failed re-read keeps the last token read (as client-go does). Thread-safe.
class BearerToken {
 public:
  // Throws KubeConfigError when config.token_file is set and cannot be read or is empty.
  explicit BearerToken(const ClusterConfig& config,
                       std::chrono::steady_clock::duration max_age = kTokenReReadPeriod);

  // The token to send now; empty when the config has no token.
  std::string current();

 private:
  struct FileVersion {
    std::int64_t mtime_ns = -1;
    std::int64_t size = -1;
    ino_t inode = 0;
    bool operator==(const FileVersion&) const = default;
  };

  std::optional<FileVersion> stat_file() const;  // nullopt when the file cannot be stat'ed
  std::string read_token_file(FileVersion& version) const;  // throws KubeConfigError

  const std::string file_;
  const std::chrono::steady_clock::duration max_age_;
  std::mutex mutex_;
  std::string token_;
  FileVersion version_;
  std::chrono::steady_clock::time_point read_at_;
};

}  // namespace tessel::kube
