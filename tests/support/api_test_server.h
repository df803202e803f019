// The Kubernetes API test server: an in-process kube-apiserver stand-in that speaks the REST
// API over HTTPS (or HTTP) on a loopback port, keeps objects in memory with one global
// resourceVersion counter, and reproduces what a real v1.26 kube-apiserver does for everything
// tessel uses (../shared/specs/kube-api-observed.md and the captured fixtures decide). Several
// instances may run in one process, one per cluster in multi-cluster tests.
//
// Tests that talk to it must also pass against a real cluster, so it must never be more
// lenient than kube-apiserver. Faults and the authorizer exist only here: tests that use them
// skip against a real cluster.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::testing {

// Who made a request, as the authenticator decided.
struct UserInfo {
  std::string name;  // "system:anonymous" when no credential was given
  std::vector<std::string> groups;
};

// What the authorizer is asked, in the shape of Kubernetes' SubjectAccessReview attributes.
struct RequestAttributes {
  UserInfo user;
  std::string verb;              // get list watch create update patch delete deletecollection
  std::string api_group;         // "" for core
  std::string resource;          // plural: "pods"
  std::string subresource;       // "status", or ""
  std::string namespace_;        // "" for cluster-scoped resources and all-namespaces requests
  std::string name;              // "" for collections
  bool resource_request = true;  // false for /api, /apis, /version, /openapi/...
  std::string path;              // the request path, without the query
};

// Returns true to allow. The default authorizer allows every authenticated user and denies
// system:anonymous on resource requests (as RBAC with no anonymous bindings does).
using Authorizer = std::function<bool(const RequestAttributes&)>;

// How a server decides who may do what.
enum class Authorization {
  // Every authenticated user may do everything; system:anonymous only reads /healthz, /livez,
  // /readyz and /version.
  kAllowAuthenticated,
  // As kube-apiserver with --authorization-mode=RBAC (api_rbac.h): system:masters may do
  // everything, everyone else what the stored Roles, ClusterRoles and bindings grant. The
  // server starts with the bootstrap policy's ClusterRoles and ClusterRoleBindings
  // (cluster-admin, system:discovery, system:basic-user, system:public-info-viewer).
  kRbac,
};

struct ApiTestServerOptions {
  bool tls = true;  // HTTPS with a CA of its own; false: plain HTTP
  // Bearer tokens the server accepts, and whose they are. A client certificate signed by the
  // server's CA authenticates as its CN, with its O entries as groups.
  struct Token {
    std::string token;
    UserInfo user;
  };
  std::vector<Token> tokens = {{"admin-token", {"admin", {"system:masters"}}}};
  // A watch (or a list with resourceVersion + resourceVersionMatch=Exact, or a continue
  // token) older than this many resourceVersions answers 410 Gone / an ERROR event with
  // code 410, as etcd compaction makes a real server do.
  std::int64_t watch_window = 1000;
  // The server closes a watch after this long when the client asked for no timeoutSeconds
  // (kube-apiserver picks 30-60 minutes); a client's timeoutSeconds is always honoured.
  std::chrono::seconds default_watch_timeout{1800};
  // How often an open watch with allowWatchBookmarks=true gets a BOOKMARK event.
  std::chrono::milliseconds bookmark_interval{1000};
  // CustomResourceDefinitions to serve from the start: every *.yaml / *.json file here (a
  // file may hold several YAML documents). Empty: none. CRDs can also be created through the
  // API, as on a real cluster.
  std::string crd_directory;
  // The version /version reports. kubectl's dispatcher picks its kubectl from it, see the spec.
  std::string git_version = "v1.26.4";
  // How long a list asking for a resourceVersion the server has not reached waits for it
  // before answering 504 Timeout (kube-apiserver waits 3 s).
  std::chrono::milliseconds future_resource_version_wait{3000};
  // The authorizer the server starts with (set_authorizer replaces it).
  Authorization authorization = Authorization::kAllowAuthenticated;
};

class ApiTestServer {
 public:
  explicit ApiTestServer(ApiTestServerOptions options = {});
  ~ApiTestServer();  // stops serving; open connections are closed
  ApiTestServer(const ApiTestServer&) = delete;
  ApiTestServer& operator=(const ApiTestServer&) = delete;

  // "https://127.0.0.1:<port>" (or http://).
  std::string url() const;
  // The server CA's certificate (PEM), for clients to verify the server with.
  std::string ca_pem() const;

  // A client certificate and key (PEM) for `user`, signed by the server's CA.
  struct ClientCertificate {
    std::string cert_pem;
    std::string key_pem;
  };
  ClientCertificate issue_client_certificate(const UserInfo& user) const;
  // Adds a bearer token at run time (a service account, say).
  void add_token(const std::string& token, const UserInfo& user);

  // Writes a kubeconfig for this server (CA data embedded) with one context, "test", using
  // the given bearer token, and returns its path (which the caller owns).
  std::string write_kubeconfig(const std::string& path, const std::string& token = "admin-token",
                               const std::string& default_namespace = "default") const;

  // Replaces the authorizer options.authorization chose; an empty one restores the default
  // (kAllowAuthenticated's).
  void set_authorizer(Authorizer authorizer);

  // --- fault injection ---
  // The next `count` requests answer `http_status` (429, 500, 503, ...) with a Status body,
  // and Retry-After when retry_after_seconds >= 0. Watch requests are affected only when
  // include_watches.
  void fail_next(int count, int http_status, int retry_after_seconds = -1,
                 bool include_watches = false);
  // Every request waits this long before it is handled (0 turns it off).
  void set_latency(std::chrono::milliseconds latency);
  // Ends every open watch now, as if the connection dropped (the chunked body is cut
  // without its terminating chunk).
  void drop_watches();
  // Refuses (closes at once) every new connection and cuts open ones for `duration`.
  void partition(std::chrono::milliseconds duration);
  // Simulates an apiserver restart that lost its watch cache: open watches are dropped, and
  // every resourceVersion older than the current one answers 410 Gone for watches.
  void restart_watch_cache();

  // --- direct access, for assertions and set-up that bypass the API ---
  // The stored object, as GET would return it; null when absent.
  nlohmann::json get_object(const std::string& api_version, const std::string& kind,
                            const std::string& namespace_, const std::string& name) const;
  std::int64_t current_resource_version() const;
  // Requests served so far, "METHOD path?query" each, for tests of what a client sends.
  std::vector<std::string> request_log() const;
  void clear_request_log();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::testing
