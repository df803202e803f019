// ApiTestServer: the pieces of the Kubernetes API test server put together (storage, served
// resources, verbs, controllers, authentication) behind an HttpServer, with fault injection
// and a request log in front of the handler.
#include "tests/support/api_test_server.h"

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <thread>

#include "kube/base64.h"
#include "tests/support/api_crd_loader.h"
#include "tests/support/api_errors.h"
#include "tests/support/api_garbage_collector.h"
#include "tests/support/api_handler.h"
#include "tests/support/api_rbac.h"
#include "tests/support/api_token_controller.h"
#include "tests/support/http_server.h"

namespace tessel::testing {

using nlohmann::json;

struct ApiTestServer::Impl {
  explicit Impl(ApiTestServerOptions server_options)
      : options(std::move(server_options)),
        store(options.watch_window),
        verbs(store, resources, options.future_resource_version_wait),
        service_account_tokens(store),
        authenticator(options.tokens, &service_account_tokens),
        handler(store, resources, verbs, authenticator, service_account_tokens, options.git_version,
                {options.default_watch_timeout, options.bookmark_interval}) {
    verbs.create_initial_objects();
    if (options.authorization == Authorization::kRbac) {
      create_bootstrap_policy();
      const RbacAuthorizer rbac(store);
      handler.set_authorizer(rbac, [rbac](const UserInfo& user, const std::string& namespace_) {
        return std::optional(rbac.rules_for(user, namespace_));
      });
    }
    if (!options.crd_directory.empty()) load_crds(options.crd_directory, verbs, resources);
    collector.emplace(store, resources, verbs);
    std::optional<TlsIdentity> identity;
    if (options.tls) {
      authority.emplace();
      const TestCertificate certificate = authority->issue_server();
      identity = TlsIdentity{certificate.cert_pem, certificate.key_pem, authority->ca_pem()};
    }
    token_controller.emplace(store, resources, verbs, service_account_tokens,
                             authority ? authority->ca_pem() : std::string());
    store.set_change_listener([this](const StoredEvent& change) {
      collector->observe(change);
      token_controller->observe(change);
    });
    http.emplace([this](const HttpServerRequest& request) { return serve(request); }, identity);
  }

  ~Impl() {
    {
      std::lock_guard lock(partition_mutex);
      partition_stopping = true;
    }
    partition_changed.notify_all();
    if (partition_thread.joinable()) partition_thread.join();
    http.reset();  // no request runs past here
    store.set_change_listener(nullptr);
    collector.reset();
    token_controller.reset();
  }

  void create_bootstrap_policy() {
    for (const json& object : rbac_bootstrap_policy()) {
      const auto type = resources.find_kind(object.at("apiVersion"), object.at("kind"));
      verbs.create({type, "", "", ""}, object, {false, "kube-apiserver", "Ignore"});
    }
  }

  HttpServerResponse serve(const HttpServerRequest& request) {
    {
      std::lock_guard lock(log_mutex);
      log.push_back(request.method + " " + request.target);
    }
    std::chrono::milliseconds delay;
    std::optional<ApiError> fault;
    {
      std::lock_guard lock(fault_mutex);
      delay = latency;
      if (fail_count > 0 && (fail_watches || !ApiHandler::is_watch(request))) {
        --fail_count;
        fault = injected_fault(fail_status, fail_retry_after);
      }
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (fault) return error_response(*fault);
    return handler.handle(request);
  }

  void start_partition(std::chrono::milliseconds duration) {
    std::unique_lock lock(partition_mutex);
    partition_until = std::chrono::steady_clock::now() + duration;
    http->set_refusing(true);
    store.end_watches(WatchSubscription::End::kDropped);
    if (!partition_thread.joinable()) {
      partition_thread = std::thread([this] { heal_partitions(); });
    }
    partition_changed.notify_all();
  }

  // Ends each partition when its time is up.
  void heal_partitions() {
    std::unique_lock lock(partition_mutex);
    while (!partition_stopping) {
      if (partition_until && std::chrono::steady_clock::now() >= *partition_until) {
        partition_until.reset();
        http->set_refusing(false);
      }
      if (partition_until) {
        partition_changed.wait_until(lock, *partition_until);
      } else {
        partition_changed.wait(lock);
      }
    }
  }

  ApiTestServerOptions options;
  ObjectStore store;
  ServedResources resources;
  ApiVerbs verbs;
  ServiceAccountTokens service_account_tokens;
  Authenticator authenticator;
  ApiHandler handler;
  std::optional<GarbageCollector> collector;
  std::optional<TokenController> token_controller;
  std::optional<TestCertificateAuthority> authority;

  std::mutex fault_mutex;
  int fail_count = 0;
  int fail_status = 500;
  int fail_retry_after = -1;
  bool fail_watches = false;
  std::chrono::milliseconds latency{0};

  std::mutex log_mutex;
  std::vector<std::string> log;

  std::mutex partition_mutex;
  std::condition_variable partition_changed;
  std::optional<std::chrono::steady_clock::time_point> partition_until;
  bool partition_stopping = false;
  std::thread partition_thread;

  std::optional<HttpServer> http;  // last: destroyed (stopped) first
};

ApiTestServer::ApiTestServer(ApiTestServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

ApiTestServer::~ApiTestServer() = default;

std::string ApiTestServer::url() const {
  return std::string(impl_->options.tls ? "https" : "http") +
         "://127.0.0.1:" + std::to_string(impl_->http->port());
}

std::string ApiTestServer::ca_pem() const {
  return impl_->authority ? impl_->authority->ca_pem() : std::string();
}

ApiTestServer::ClientCertificate ApiTestServer::issue_client_certificate(
    const UserInfo& user) const {
  if (!impl_->authority) {
    throw std::logic_error("issue_client_certificate: the server runs plain HTTP (tls = false)");
  }
  const TestCertificate certificate = impl_->authority->issue_client(user.name, user.groups);
  return {certificate.cert_pem, certificate.key_pem};
}

void ApiTestServer::add_token(const std::string& token, const UserInfo& user) {
  impl_->authenticator.add_token(token, user);
}

std::string ApiTestServer::write_kubeconfig(const std::string& path, const std::string& token,
                                            const std::string& default_namespace) const {
  std::string cluster = "    server: " + url() + "\n";
  if (impl_->authority) {
    cluster += "    certificate-authority-data: " + kube::base64_encode(ca_pem()) + "\n";
  }
  const std::string text =
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: test\n"
      "  cluster:\n" +
      cluster +
      "users:\n"
      "- name: test\n"
      "  user:\n"
      "    token: " +
      json(token).dump() +
      "\n"
      "contexts:\n"
      "- name: test\n"
      "  context:\n"
      "    cluster: test\n"
      "    user: test\n"
      "    namespace: " +
      json(default_namespace).dump() +
      "\n"
      "current-context: test\n";
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write kubeconfig " + path);
  return path;
}

void ApiTestServer::set_authorizer(Authorizer authorizer) {
  impl_->handler.set_authorizer(std::move(authorizer));
}

void ApiTestServer::fail_next(int count, int http_status, int retry_after_seconds,
                              bool include_watches) {
  std::lock_guard lock(impl_->fault_mutex);
  impl_->fail_count = count;
  impl_->fail_status = http_status;
  impl_->fail_retry_after = retry_after_seconds;
  impl_->fail_watches = include_watches;
}

void ApiTestServer::set_latency(std::chrono::milliseconds latency) {
  std::lock_guard lock(impl_->fault_mutex);
  impl_->latency = latency;
}

void ApiTestServer::drop_watches() { impl_->store.end_watches(WatchSubscription::End::kDropped); }

void ApiTestServer::partition(std::chrono::milliseconds duration) {
  impl_->start_partition(duration);
}

void ApiTestServer::restart_watch_cache() { impl_->store.restart_watch_cache(); }

json ApiTestServer::get_object(const std::string& api_version, const std::string& kind,
                               const std::string& namespace_, const std::string& name) const {
  const auto type = impl_->resources.find_kind(api_version, kind);
  if (!type) return nullptr;
  try {
    return impl_->verbs.get({type, type->namespaced() ? namespace_ : "", name, ""});
  } catch (const ApiError&) {
    return nullptr;
  }
}

std::int64_t ApiTestServer::current_resource_version() const {
  return impl_->store.current_resource_version();
}

std::vector<std::string> ApiTestServer::request_log() const {
  std::lock_guard lock(impl_->log_mutex);
  return impl_->log;
}

void ApiTestServer::clear_request_log() {
  std::lock_guard lock(impl_->log_mutex);
  impl_->log.clear();
}

}  // namespace tessel::testing
