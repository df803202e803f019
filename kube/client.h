// The REST client of the Kubernetes API: the verbs (get, list, create, update, patch, apply,
// delete, watch) on a resource, over an HttpTransport.
//
// Every request goes through the client's token bucket (qps/burst, as client-go's
// flowcontrol) and the retry policy of kube/retry.h (429 and 5xx with Retry-After or backoff,
// connection errors for requests that are safe to repeat). An error answer is thrown as
// ApiError, built from the Status body, or synthesized naming the method, path and status when
// the body is not a Status. Warning headers of the answers are logged. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "kube/api_error.h"
#include "kube/clock.h"
#include "kube/config.h"
#include "kube/http_transport.h"
#include "kube/log.h"
#include "kube/rate_limiter.h"
#include "kube/resource.h"
#include "kube/retry.h"
#include "kube/watch_stream.h"

namespace tessel::kube {

struct ClientOptions {
  // Request rate, as client-go's rest.Config QPS and Burst (defaults 5 and 10; the operator
  // sets more). qps <= 0: unlimited.
  double qps = 5;
  int burst = 10;
  Backoff backoff;  // retries of one request
  std::string user_agent = "tessel";
  // fieldManager of server-side apply when ApplyOptions names none. Other writes send one only
  // when their options name it (else the server derives it from the User-Agent).
  std::string field_manager = "tessel";
  // Per-request timeout handed to the transport; zero: the transport's default.
  std::chrono::milliseconds request_timeout{0};
  // Tests: the rate limiter's clock (nullptr: the real one), the sleeps between retries (empty:
  // real sleeps), the backoff jitter's seed.
  Clock* clock = nullptr;
  Sleeper sleeper;
  std::uint64_t seed = 0x7e55e1;
  // nullptr: a Logger with component "kube-client", info level, on stderr.
  std::shared_ptr<const Logger> logger;
  // Told of every answer (each attempt of a retried request, and a watch when its stream ends)
  // with the request's verb as the API server's authorizer names it (request_verb) and the HTTP
  // status; code 0 when no answer came or a watch's stream broke (TransportError). Called on
  // the requesting thread: must be thread-safe and must not throw. Empty: nobody is told.
  std::function<void(std::string_view verb, int code)> on_response;
};

// The Kubernetes verb of a request, as kube-apiserver's RequestInfo resolves it from the method
// and the target: get, list, watch, create, update, patch, delete, deletecollection; for paths
// outside a resource (discovery, /version) the lower-case method.
std::string request_verb(std::string_view method, std::string_view target);

// The query options of writes. Empty strings are left out.
struct WriteOptions {
  std::string field_manager;     // empty: none sent
  std::string field_validation;  // "Strict", "Warn" or "Ignore"; empty: the server's default
  bool dry_run = false;          // dryRun=All
};

enum class PatchType {
  kMerge,           // application/merge-patch+json (RFC 7386)
  kJson,            // application/json-patch+json (RFC 6902)
  kStrategicMerge,  // application/strategic-merge-patch+json (built-in types only)
  kApply,           // application/apply-patch+yaml: server-side apply
};

std::string_view content_type(PatchType type);

struct PatchOptions {
  std::string field_manager;  // empty: none sent; for kApply, ClientOptions::field_manager
  bool force = false;         // kApply only: take over conflicting fields
  std::string field_validation;
  bool dry_run = false;
};

struct ApplyOptions {
  std::string field_manager;  // empty: ClientOptions::field_manager
  bool force = true;          // a controller owns its fields: force, as controller-runtime does
  std::string field_validation;
  bool dry_run = false;
};

// metav1.DeleteOptions. Unset fields are left out; an all-default value sends no body.
struct DeleteOptions {
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
  std::string propagation_policy;  // "Orphan", "Background", "Foreground"
  std::optional<std::int64_t> grace_period_seconds;
  bool dry_run = false;

  // The request body, or null when every field is unset.
  nlohmann::json to_json() const;
};

// A whole collection, all pages read.
struct ListResult {
  std::vector<nlohmann::json> items;
  std::string resource_version;  // the list's metadata.resourceVersion
};

// How a watch ended, when it ended without an exception.
struct WatchResult {
  enum class End {
    kServerClosed,    // the server ended the body (timeoutSeconds passed, or after an ERROR)
    kStopped,         // the stop_token was triggered
    kHandlerStopped,  // on_event returned false
    kDecodeError,     // the body was not a watch stream; detail says why
  };
  End end = End::kServerClosed;
  std::string detail;
  int events = 0;  // events handed to on_event
};

std::string_view to_string(WatchResult::End end);

// Returns false to end the watch.
using WatchHandler = std::function<bool(const WatchEvent& event)>;

class Client {
 public:
  explicit Client(std::shared_ptr<HttpTransport> transport, ClientOptions options = {});
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // A client over make_curl_transport(config), with the options' user agent and timeout.
  static std::shared_ptr<Client> from_config(const ClusterConfig& config,
                                             ClientOptions options = {});

  // --- verbs on a resource -----------------------------------------------------------------
  // `ns` is the namespace ("" for cluster-scoped resources); `subresource` ("status", "scale")
  // may be empty.

  nlohmann::json get(const ResourceInfo& info, const std::string& ns, const std::string& name,
                     const std::string& subresource = "");

  // One page: the List object as the server sent it (items, metadata.continue, ...).
  nlohmann::json list(const ResourceInfo& info, const std::string& ns,
                      const ListOptions& options = {});

  // Every page, following metadata.continue. When a continue token has expired (410), starts
  // again with a full list from scratch, as client-go's pager does, so the result is one
  // consistent snapshot. options.limit sets the page size (unset: 500).
  ListResult list_all(const ResourceInfo& info, const std::string& ns, ListOptions options = {});

  // POST to the collection of object's namespace (metadata.namespace, else `ns`).
  nlohmann::json create(const ResourceInfo& info, const std::string& ns,
                        const nlohmann::json& object, const WriteOptions& options = {});

  // PUT of the whole object; metadata.resourceVersion makes it conditional (409 Conflict when
  // stale). Namespace and name come from the object.
  nlohmann::json update(const ResourceInfo& info, const nlohmann::json& object,
                        const WriteOptions& options = {});
  nlohmann::json update_status(const ResourceInfo& info, const nlohmann::json& object,
                               const WriteOptions& options = {});

  nlohmann::json patch(const ResourceInfo& info, const std::string& ns, const std::string& name,
                       PatchType type, const nlohmann::json& patch,
                       const PatchOptions& options = {}, const std::string& subresource = "");

  // Server-side apply of `object` (apiVersion, kind, metadata.name, the fields this manager
  // owns), to the object or to `subresource` ("status").
  nlohmann::json apply(const ResourceInfo& info, const nlohmann::json& object,
                       const ApplyOptions& options = {}, const std::string& subresource = "");

  // DELETE. Returns the body: the object (still there with a deletionTimestamp while
  // finalizers or graceful deletion hold it, or its last state) or a Status of kind Success.
  nlohmann::json remove(const ResourceInfo& info, const std::string& ns, const std::string& name,
                        const DeleteOptions& options = {});

  // POST to a named object's subresource ("eviction", "binding").
  nlohmann::json create_subresource(const ResourceInfo& info, const std::string& ns,
                                    const std::string& name, const std::string& subresource,
                                    const nlohmann::json& body, const WriteOptions& options = {});

  // --- the same, resolving the resource from the object's apiVersion and kind ----------------

  nlohmann::json create(const nlohmann::json& object, const WriteOptions& options = {});
  nlohmann::json update(const nlohmann::json& object, const WriteOptions& options = {});
  nlohmann::json update_status(const nlohmann::json& object, const WriteOptions& options = {});
  nlohmann::json apply(const nlohmann::json& object, const ApplyOptions& options = {});
  nlohmann::json remove(const nlohmann::json& object, const DeleteOptions& options = {});

  // The resource serving apiVersion/kind: from the registry, else from discovery
  // (GET /api/v1 or /apis/<group>/<version>), whose answer is added to the registry.
  // Throws std::invalid_argument when discovery does not list the kind, ApiError when the
  // group/version is unknown to the server.
  ResourceInfo resource_for(std::string_view api_version, std::string_view kind);
  ResourceInfo resource_for(const nlohmann::json& object);
  // Adds a resource (e.g. from a CRD) so that no discovery is needed for it.
  void register_resource(ResourceInfo info);

  // --- watch ----------------------------------------------------------------------------------

  // GET with watch=true (options.watch is forced). Hands each event, ERROR events included, to
  // on_event as it arrives; an ERROR event is handed over as such (a 410 Expired Status means
  // the resourceVersion is gone: relist). Returns how the stream ended. Throws ApiError when
  // the server answered the watch request with an error, TransportError when the connection
  // failed or broke. The request is rate limited but not retried: the caller (the reflector)
  // decides whether to watch again or list.
  WatchResult watch(const ResourceInfo& info, const std::string& ns, ListOptions options,
                    const WatchHandler& on_event, std::stop_token stop = {});

  // --- raw -------------------------------------------------------------------------------------

  // One request with the client's headers, rate limit and retries; target is path and query.
  // Returns the parsed JSON body (null when empty); throws ApiError for a non-2xx answer and
  // TransportError when no answer came. content_type may be empty when body is.
  nlohmann::json request(const std::string& method, const std::string& target,
                         const std::string& body = "", std::string_view content_type = "");

  const ClientOptions& options() const { return options_; }
  const Logger& logger() const { return *logger_; }

 private:
  HttpResponse send(HttpRequest request);  // rate limit + retries; returns the last response
  nlohmann::json parse_body(const HttpRequest& request, const HttpResponse& response) const;
  void log_warnings(const HttpRequest& request, const HttpResponse& response) const;
  HttpRequest make_request(const std::string& method, std::string target, std::string body,
                           std::string_view content_type) const;
  std::string write_query(const WriteOptions& options) const;
  std::uint64_t next_seed();

  const std::shared_ptr<HttpTransport> transport_;
  const ClientOptions options_;
  const std::shared_ptr<const Logger> logger_;
  TokenBucket bucket_;

  std::mutex mutex_;  // guards registry_ and seed_
  ResourceRegistry registry_;
  std::uint64_t seed_;
};

}  // namespace tessel::kube
