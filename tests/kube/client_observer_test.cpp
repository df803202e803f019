// ClientOptions::on_response, what the operator counts API requests by verb and code with: each
// answer is reported with the verb the API server's authorizer would name (request_verb) and
// its status, each attempt of a retried request, and code 0 when no answer came.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kube/api_error.h"
#include "kube/client.h"
#include "tests/kube/fake_transport.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using Seen = std::vector<std::pair<std::string, int>>;

// What the observer was told, from any thread.
class ResponseLog {
 public:
  std::function<void(std::string_view, int)> observer() {
    return [this](std::string_view verb, int code) {
      std::lock_guard lock(mutex_);
      seen_.emplace_back(std::string(verb), code);
    };
  }
  Seen take() {
    std::lock_guard lock(mutex_);
    return std::exchange(seen_, {});
  }

 private:
  std::mutex mutex_;
  Seen seen_;
};

TEST(RequestVerb, NamesVerbsAsTheApiServerDoes) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"GET", "/api/v1/namespaces/default/pods/p", "get"},
      {"GET", "/api/v1/namespaces/default/pods?limit=500", "list"},
      {"GET", "/api/v1/pods", "list"},
      {"GET", "/api/v1/namespaces/default/pods?watch=true&resourceVersion=7", "watch"},
      {"GET", "/apis/tessel.dev/v1alpha1/trainingjobs?allowWatchBookmarks=true&watch=1", "watch"},
      {"GET", "/apis/tessel.dev/v1alpha1/namespaces/a/trainingjobs?watch=false", "list"},
      {"GET", "/api/v1/watch/namespaces/default/pods", "watch"},
      {"GET", "/api/v1/namespaces/default", "get"},
      {"GET", "/api/v1/namespaces", "list"},
      {"PUT", "/api/v1/namespaces/default/finalize", "update"},
      {"POST", "/api/v1/namespaces/default/pods", "create"},
      {"POST", "/api/v1/namespaces/default/pods/p/eviction", "create"},
      {"PUT", "/apis/tessel.dev/v1alpha1/namespaces/a/trainingjobs/j/status", "update"},
      {"PATCH", "/apis/coordination.k8s.io/v1/namespaces/a/leases/l?fieldManager=x", "patch"},
      {"DELETE", "/api/v1/namespaces/default/pods/p", "delete"},
      {"DELETE", "/api/v1/namespaces/default/pods?labelSelector=a%3Db", "deletecollection"},
      {"GET", "/api/v1", "get"},  // discovery: not a resource
      {"GET", "/apis/tessel.dev/v1alpha1", "get"},
      {"GET", "/version", "get"},
      {"HEAD", "/healthz", "head"},
  };
  for (const auto& [method, target, verb] : cases)
    EXPECT_EQ(request_verb(method, target), verb) << method << " " << target;
}

TEST(ClientObserver, SeesVerbAndCodeOfEachRequestToTheCluster) {
  tessel::testing::TestCluster cluster;
  const ResourceInfo jobs = cluster.ensure_test_crd();
  const std::string ns = cluster.namespace_name();
  ResponseLog log;
  ClientOptions options = tessel::testing::TestCluster::unlimited();
  options.on_response = log.observer();
  const std::shared_ptr<Client> client = cluster.client(options);
  client->register_resource(jobs);

  const json created = client->create(jobs, ns, tessel::testing::test_job(ns, "observed"));
  client->get(jobs, ns, "observed");
  client->list(jobs, ns);
  json changed = created;
  changed["spec"]["replicas"] = 2;
  client->update(jobs, changed);
  client->patch(jobs, ns, "observed", PatchType::kMerge,
                {{"metadata", {{"labels", {{"a", "b"}}}}}});
  EXPECT_THROW(client->get(jobs, ns, "missing"), ApiError);
  ListOptions watch;
  watch.timeout_seconds = 1;  // the server ends the watch after a second
  client->watch(jobs, ns, watch, [](const WatchEvent&) { return true; });
  client->remove(jobs, ns, "observed");
  EXPECT_EQ(log.take(), (Seen{{"create", 201},
                              {"get", 200},
                              {"list", 200},
                              {"update", 200},
                              {"patch", 200},
                              {"get", 404},
                              {"watch", 200},
                              {"delete", 200}}));
}

class ClientObserverRetries : public ::testing::Test {
 protected:
  Client& client() {
    options_.qps = 0;
    options_.backoff.steps = 3;
    options_.sleeper = [](std::chrono::nanoseconds) {};
    options_.on_response = log_.observer();
    client_ = std::make_unique<Client>(transport_, options_);
    return *client_;
  }

  const ResourceInfo& pods() {
    static const ResourceRegistry registry;
    return *registry.find_resource("", "pods");
  }

  std::shared_ptr<testing::FakeTransport> transport_ = std::make_shared<testing::FakeTransport>();
  ClientOptions options_;
  ResponseLog log_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientObserverRetries, EveryAttemptIsSeenAndNoAnswerIsCodeZero) {
  const json status = {{"kind", "Status"}, {"code", 503}, {"message", "overloaded"}};
  transport_->push(testing::answer(503, status));
  transport_->push(testing::transport_failure("connection refused", false, false));
  transport_->push(testing::answer(200, {{"kind", "PodList"}, {"items", json::array()}}));
  client().list(pods(), "default");
  EXPECT_EQ(log_.take(), (Seen{{"list", 503}, {"list", 0}, {"list", 200}}));
}

TEST_F(ClientObserverRetries, AWatchWhoseStreamBreaksIsCodeZero) {
  testing::Scripted broken = testing::watch_body("{\"type\":");
  broken.error.emplace("connection reset by peer", false, true);
  transport_->push(broken);
  ListOptions options;
  EXPECT_THROW(client().watch(pods(), "default", options, [](const WatchEvent&) { return true; }),
               TransportError);
  EXPECT_EQ(log_.take(), (Seen{{"watch", 0}}));
}

}  // namespace
}  // namespace tessel::kube
