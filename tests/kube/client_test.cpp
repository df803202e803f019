#include "kube/client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "kube/clock.h"
#include "tests/kube/custom_resources.h"
#include "tests/kube/fake_transport.h"
#include "tests/kube/fixtures.h"
#include "tests/kube/recorded_request.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using testing::answer;
using testing::expect_fixture_request;
using testing::FakeTransport;
using testing::fixture;
using testing::fixture_answer;
using testing::fixture_body;
using testing::fixture_text;
using testing::header_of;
using testing::target_path;
using testing::target_query;
using testing::transport_failure;
using testing::watch_body;
using testing::watch_line;

const ResourceInfo& resource(std::string_view group, std::string_view name) {
  static const ResourceRegistry registry;
  const ResourceInfo* info = registry.find_resource(group, name);
  if (info == nullptr) throw std::logic_error("no builtin resource " + std::string(name));
  return *info;
}

const ResourceInfo& trainingjobs() { return testing::trainingjobs_resource(); }

// Options with a few fields set (designated initializers would warn about the others).
template <typename Options, typename Set>
Options with(Set set) {
  Options options;
  set(options);
  return options;
}

json request_body(const std::string& name) { return fixture(name).at("request").at("body"); }

class ClientTest : public ::testing::Test {
 protected:
  ClientTest() {
    options_.qps = 0;  // unlimited unless a test sets a rate
    options_.user_agent = "tessel-operator/0.1.0 (linux/amd64)";
    options_.sleeper = [this](std::chrono::nanoseconds delay) { sleeps_.push_back(delay); };
    options_.logger = std::make_shared<const Logger>("kube-client", LogLevel::kDebug,
                                                     [this](std::string_view line) {
                                                       std::lock_guard lock(log_mutex_);
                                                       log_.emplace_back(line);
                                                     });
  }

  Client& client() {
    if (!client_) client_ = std::make_unique<Client>(transport_, options_);
    return *client_;
  }

  std::vector<std::string> log_lines() {
    std::lock_guard lock(log_mutex_);
    return log_;
  }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  ClientOptions options_;
  std::unique_ptr<Client> client_;
  std::vector<std::chrono::nanoseconds> sleeps_;
  std::mutex log_mutex_;
  std::vector<std::string> log_;
};

// Each verb builds exactly the request the fixture recorded and returns the recorded body.
struct VerbCase {
  std::string fixture;
  std::function<json(Client&)> call;
};

class VerbTest : public ClientTest, public ::testing::WithParamInterface<VerbCase> {};

TEST_P(VerbTest, BuildsTheRecordedRequestAndParsesTheAnswer) {
  const VerbCase& verb = GetParam();
  transport_->push(fixture_answer(verb.fixture));
  const json result = verb.call(client());
  ASSERT_EQ(transport_->request_count(), 1u);
  expect_fixture_request(transport_->request(0), verb.fixture);
  EXPECT_EQ(header_of(transport_->request(0), "User-Agent"), "tessel-operator/0.1.0 (linux/amd64)");
  EXPECT_EQ(result, fixture_body(verb.fixture));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, VerbTest,
    ::testing::Values(
        VerbCase{"201-create-trainingjob.json",
                 [](Client& c) {
                   return c.create(trainingjobs(), "default",
                                   request_body("201-create-trainingjob.json"));
                 }},
        VerbCase{"201-create-unknown-field-warn.json",
                 [](Client& c) {
                   return c.create(
                       trainingjobs(), "", request_body("201-create-unknown-field-warn.json"),
                       with<WriteOptions>([](WriteOptions& o) { o.field_validation = "Warn"; }));
                 }},
        VerbCase{"201-create-namespace.json",
                 [](Client& c) {
                   return c.create(resource("", "namespaces"), "",
                                   request_body("201-create-namespace.json"));
                 }},
        VerbCase{"200-get-trainingjob.json",
                 [](Client& c) { return c.get(trainingjobs(), "default", "gpt-a"); }},
        VerbCase{
            "200-get-cluster-scoped-cr.json",
            [](Client& c) { return c.get(testing::memberclusters_resource(), "", "edge-eu"); }},
        VerbCase{"200-list-trainingjobs-labelselector.json",
                 [](Client& c) {
                   return c.list(trainingjobs(), "default", with<ListOptions>([](ListOptions& o) {
                                   o.label_selector = "tessel.dev/team=llm,app!=x";
                                 }));
                 }},
        VerbCase{"200-list-pods-fieldselector-nodename.json",
                 [](Client& c) {
                   return c.list(resource("", "pods"), "", with<ListOptions>([](ListOptions& o) {
                                   o.field_selector = "spec.nodeName=gpu-node-a";
                                 }));
                 }},
        VerbCase{"200-list-trainingjobs-all-namespaces.json",
                 [](Client& c) { return c.list(trainingjobs(), ""); }},
        VerbCase{"200-update-spec-generation-bump.json",
                 [](Client& c) {
                   return c.update(trainingjobs(),
                                   request_body("200-update-spec-generation-bump.json"));
                 }},
        VerbCase{"200-status-update-put.json",
                 [](Client& c) {
                   return c.update_status(trainingjobs(),
                                          request_body("200-status-update-put.json"));
                 }},
        VerbCase{"200-json-patch.json",
                 [](Client& c) {
                   return c.patch(trainingjobs(), "default", "gpt-a", PatchType::kJson,
                                  request_body("200-json-patch.json"));
                 }},
        VerbCase{"200-status-merge-patch.json",
                 [](Client& c) {
                   return c.patch(trainingjobs(), "default", "gpt-a", PatchType::kMerge,
                                  request_body("200-status-merge-patch.json"), {}, "status");
                 }},
        VerbCase{"200-node-annotate-merge-patch.json",
                 [](Client& c) {
                   return c.patch(resource("", "nodes"), "", "gpu-node-b", PatchType::kMerge,
                                  request_body("200-node-annotate-merge-patch.json"),
                                  with<PatchOptions>(
                                      [](PatchOptions& o) { o.field_manager = "tessel-prober"; }));
                 }},
        VerbCase{"200-node-status-patch-ready.json",
                 [](Client& c) {
                   return c.patch(resource("", "nodes"), "", "gpu-node-b",
                                  PatchType::kStrategicMerge,
                                  request_body("200-node-status-patch-ready.json"), {}, "status");
                 }},
        VerbCase{"200-ssa-status-apply.json",
                 [](Client& c) {
                   return c.apply(trainingjobs(), request_body("200-ssa-status-apply.json"),
                                  with<ApplyOptions>(
                                      [](ApplyOptions& o) { o.field_manager = "tessel-operator"; }),
                                  "status");
                 }},
        VerbCase{"200-delete-trainingjob-foreground.json",
                 [](Client& c) {
                   return c.remove(trainingjobs(), "default", "gpt-fg",
                                   with<DeleteOptions>([](DeleteOptions& o) {
                                     o.propagation_policy = "Foreground";
                                   }));
                 }},
        VerbCase{"200-delete-trainingjob.json",
                 [](Client& c) {
                   return c.remove(trainingjobs(), "default", "gpt-gc",
                                   with<DeleteOptions>([](DeleteOptions& o) {
                                     o.propagation_policy = "Background";
                                   }));
                 }},
        VerbCase{"200-delete-pod-grace0.json",
                 [](Client& c) {
                   return c.remove(
                       resource("", "pods"), "default", "gpt-a-s0-r0",
                       with<DeleteOptions>([](DeleteOptions& o) { o.grace_period_seconds = 0; }));
                 }},
        VerbCase{"200-delete-with-finalizer.json",
                 [](Client& c) { return c.remove(trainingjobs(), "default", "gpt-f"); }},
        VerbCase{"201-lease-create.json",
                 [](Client& c) {
                   return c.create(resource("coordination.k8s.io", "leases"), "",
                                   request_body("201-lease-create.json"));
                 }},
        VerbCase{"201-create-event-core-v1.json",
                 [](Client& c) {
                   return c.create(resource("", "events"), "default",
                                   request_body("201-create-event-core-v1.json"));
                 }}),
    [](const ::testing::TestParamInfo<VerbCase>& info) {
      std::string name;
      for (const char c : info.param.fixture.substr(0, info.param.fixture.size() - 5)) {
        name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
      }
      return name;
    });

TEST_F(ClientTest, ObjectOverloadsResolveTheResourceFromApiVersionAndKind) {
  client().register_resource(testing::trainingjobs_resource());  // as the operator does from crds/
  transport_->push(fixture_answer("201-create-trainingjob.json"));
  client().create(request_body("201-create-trainingjob.json"));
  expect_fixture_request(transport_->request(0), "201-create-trainingjob.json");

  transport_->push(fixture_answer("200-update-spec-generation-bump.json"));
  client().update(request_body("200-update-spec-generation-bump.json"));
  expect_fixture_request(transport_->request(1), "200-update-spec-generation-bump.json");
}

TEST_F(ClientTest, UnknownKindIsResolvedByDiscoveryOnce) {
  transport_->push(fixture_answer("discovery/apis-apps-v1.json"));
  const json deployment = {{"apiVersion", "apps/v1"},
                           {"kind", "Deployment"},
                           {"metadata", {{"name", "web"}, {"namespace", "default"}}}};
  transport_->push(answer(201, deployment));
  transport_->push(answer(201, deployment));
  client().create(deployment);
  client().create(deployment);
  ASSERT_EQ(transport_->request_count(), 3u);
  EXPECT_EQ(transport_->request(0).target, "/apis/apps/v1");
  EXPECT_EQ(transport_->request(1).target, "/apis/apps/v1/namespaces/default/deployments");
  EXPECT_EQ(transport_->request(2).target, "/apis/apps/v1/namespaces/default/deployments");
}

TEST_F(ClientTest, KindMissingFromDiscoveryIsNamed) {
  transport_->push(fixture_answer("discovery/apis-apps-v1.json"));
  try {
    client().resource_for("apps/v1", "Widget");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("Widget"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("/apis/apps/v1"), std::string::npos) << error.what();
  }
}

TEST_F(ClientTest, UnknownGroupVersionIsAnApiError) {
  transport_->push(fixture_answer("discovery/404-unknown-group-version.json"));
  EXPECT_THROW(client().resource_for("nope.example/v1", "Thing"), ApiError);
}

TEST_F(ClientTest, ErrorAnswersAreApiErrorsFromTheStatusBody) {
  transport_->push(fixture_answer("409-conflict-stale-rv.json"));
  try {
    client().update(trainingjobs(), request_body("409-conflict-stale-rv.json"));
    FAIL() << "expected ApiError";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_conflict());
    EXPECT_EQ(error.details_name(), "gpt-a");
  }
  transport_->push(fixture_answer("422-invalid-schema.json"));
  try {
    client().create(trainingjobs(), "default", request_body("422-invalid-schema.json"));
    FAIL() << "expected ApiError";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_invalid());
    EXPECT_FALSE(error.causes().empty());
  }
}

TEST_F(ClientTest, NonStatusErrorBodyIsSynthesizedNamingMethodPathAndStatus) {
  transport_->push(fixture_answer("discovery/404-unknown-path.json"));
  try {
    client().request("GET", "/foo/bar?x=1");
    FAIL() << "expected ApiError";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_not_found());
    const std::string what = error.what();
    EXPECT_NE(what.find("GET /foo/bar"), std::string::npos) << what;
    EXPECT_NE(what.find("404"), std::string::npos) << what;
    EXPECT_NE(what.find("404 page not found"), std::string::npos) << what;
    EXPECT_EQ(what.find("x=1"), std::string::npos) << what;
  }
}

TEST_F(ClientTest, SuccessBodyThatIsNotJsonIsAnError) {
  testing::Scripted scripted = answer(200, nullptr);
  scripted.response.body = "<html>proxy</html>";
  transport_->push(scripted);
  EXPECT_THROW(client().get(trainingjobs(), "default", "gpt-a"), std::runtime_error);
}

TEST_F(ClientTest, RetriesTooManyRequestsHonouringRetryAfter) {
  json status = {{"kind", "Status"}, {"code", 429}, {"reason", "TooManyRequests"}};
  transport_->push(answer(429, status, {{"Retry-After", "2"}}));
  transport_->push(fixture_answer("201-create-trainingjob.json"));
  const json created =
      client().create(trainingjobs(), "default", request_body("201-create-trainingjob.json"));
  EXPECT_EQ(created, fixture_body("201-create-trainingjob.json"));
  EXPECT_EQ(transport_->request_count(), 2u);  // a 429 is retried even for a POST
  ASSERT_EQ(sleeps_.size(), 1u);
  EXPECT_EQ(sleeps_[0], std::chrono::seconds(2));
}

TEST_F(ClientTest, RetriesServerErrorsOfReadsWithRetryAfterFromTheStatus) {
  transport_->push(fixture_answer("504-list-future-rv.json"));
  transport_->push(fixture_answer("200-list-trainingjobs.json"));
  const json list = client().list(trainingjobs(), "default");
  EXPECT_EQ(list, fixture_body("200-list-trainingjobs.json"));
  ASSERT_EQ(sleeps_.size(), 1u);
  EXPECT_EQ(sleeps_[0], std::chrono::seconds(1));
  bool logged = false;
  for (const auto& line : log_lines()) logged |= line.find("retrying request") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST_F(ClientTest, DoesNotRetryServerErrorsOfWrites) {
  json status = {{"kind", "Status"}, {"code", 503}, {"message", "overloaded"}};
  transport_->push(answer(503, status));
  EXPECT_THROW(
      client().create(trainingjobs(), "default", request_body("201-create-trainingjob.json")),
      ApiError);
  EXPECT_EQ(transport_->request_count(), 1u);
}

TEST_F(ClientTest, GivesUpAfterTheBackoffSteps) {
  options_.backoff.steps = 3;
  json status = {{"kind", "Status"}, {"code", 500}};
  for (int i = 0; i < 3; ++i) transport_->push(answer(500, status));
  try {
    client().get(trainingjobs(), "default", "gpt-a");
    FAIL() << "expected ApiError";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.code(), 500);
  }
  EXPECT_EQ(transport_->request_count(), 3u);
  ASSERT_EQ(sleeps_.size(), 2u);
  EXPECT_GE(sleeps_[0], options_.backoff.initial);
  EXPECT_GE(sleeps_[1], 2 * options_.backoff.initial);
}

TEST_F(ClientTest, RetriesAWriteThatWasNeverSent) {
  transport_->push(transport_failure("connect to 10.0.0.1:6443: refused", false, false));
  transport_->push(fixture_answer("201-create-trainingjob.json"));
  client().create(trainingjobs(), "default", request_body("201-create-trainingjob.json"));
  EXPECT_EQ(transport_->request_count(), 2u);
}

TEST_F(ClientTest, DoesNotRetryAWriteWhoseFateIsUnknownAndRethrowsTheTransportError) {
  transport_->push(transport_failure("connection reset", false, true));
  EXPECT_THROW(
      client().create(trainingjobs(), "default", request_body("201-create-trainingjob.json")),
      TransportError);
  EXPECT_EQ(transport_->request_count(), 1u);
}

TEST_F(ClientTest, DoesNotRetryAPermanentFailureEvenOfARead) {
  transport_->push(
      transport_failure("SSL certificate problem: unable to get local issuer "
                        "certificate",
                        false, true, true));
  EXPECT_THROW(client().get(trainingjobs(), "default", "gpt-a"), TransportError);
  EXPECT_EQ(transport_->request_count(), 1u);
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(ClientTest, RetriesATimedOutRead) {
  transport_->push(transport_failure("timeout", true, true));
  transport_->push(fixture_answer("200-get-trainingjob.json"));
  EXPECT_EQ(client().get(trainingjobs(), "default", "gpt-a"),
            fixture_body("200-get-trainingjob.json"));
  EXPECT_EQ(transport_->request_count(), 2u);
}

TEST_F(ClientTest, RateLimitsRequestsWithTheTokenBucket) {
  FakeClock clock;
  options_.qps = 1;
  options_.burst = 2;
  options_.clock = &clock;
  for (int i = 0; i < 3; ++i) transport_->push(fixture_answer("200-get-trainingjob.json"));
  client().get(trainingjobs(), "default", "gpt-a");
  client().get(trainingjobs(), "default", "gpt-a");  // the burst
  auto third = std::async(std::launch::async,
                          [&] { return client().get(trainingjobs(), "default", "gpt-a"); });
  ASSERT_TRUE(clock.await_waiters(1, std::chrono::seconds(5)));
  EXPECT_EQ(transport_->request_count(), 2u);  // the third waits for a token
  clock.advance(std::chrono::milliseconds(999));
  EXPECT_EQ(transport_->request_count(), 2u);
  clock.advance(std::chrono::milliseconds(1));
  ASSERT_EQ(third.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  third.get();
  EXPECT_EQ(transport_->request_count(), 3u);
}

TEST_F(ClientTest, ListAllFollowsContinueTokens) {
  transport_->push(fixture_answer("200-list-trainingjobs-limit1-page1.json"));
  transport_->push(fixture_answer("200-list-trainingjobs-limit1-page2.json"));
  transport_->push(fixture_answer("200-list-trainingjobs-limit1-page3-last.json"));
  const ListResult result = client().list_all(
      trainingjobs(), "default", with<ListOptions>([](ListOptions& o) { o.limit = 1; }));
  ASSERT_EQ(transport_->request_count(), 3u);
  expect_fixture_request(transport_->request(0), "200-list-trainingjobs-limit1-page1.json");
  expect_fixture_request(transport_->request(1), "200-list-trainingjobs-limit1-page2.json");
  expect_fixture_request(transport_->request(2), "200-list-trainingjobs-limit1-page3-last.json");
  std::vector<std::string> names;
  for (const json& item : result.items) names.push_back(item["metadata"]["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"gpt-a", "gpt-b", "gpt-c"}));
  EXPECT_EQ(
      result.resource_version,
      fixture_body("200-list-trainingjobs-limit1-page3-last.json")["metadata"]["resourceVersion"]);
}

TEST_F(ClientTest, ListAllDefaultsToPagesOf500AndDropsTheVersionOnLaterPages) {
  json page1 = {{"kind", "List"},
                {"metadata", {{"resourceVersion", "7"}, {"continue", "next"}}},
                {"items", json::array({{{"metadata", {{"name", "a"}}}}})}};
  json page2 = {{"kind", "List"},
                {"metadata", {{"resourceVersion", "7"}}},
                {"items", json::array({{{"metadata", {{"name", "b"}}}}})}};
  transport_->push(answer(200, page1));
  transport_->push(answer(200, page2));
  const ListResult result =
      client().list_all(trainingjobs(), "default", with<ListOptions>([](ListOptions& o) {
                          o.resource_version = "5";
                          o.resource_version_match = "NotOlderThan";
                        }));
  EXPECT_EQ(result.items.size(), 2u);
  EXPECT_EQ(
      target_query(transport_->request(0).target),
      (std::vector<std::pair<std::string, std::string>>{
          {"limit", "500"}, {"resourceVersion", "5"}, {"resourceVersionMatch", "NotOlderThan"}}));
  EXPECT_EQ(
      target_query(transport_->request(1).target),
      (std::vector<std::pair<std::string, std::string>>{{"limit", "500"}, {"continue", "next"}}));
}

TEST_F(ClientTest, ListAllFallsBackToAFullListWhenTheContinueTokenExpired) {
  transport_->push(fixture_answer("200-list-trainingjobs-limit1-page1.json"));
  transport_->push(fixture_answer("410-list-continue-token-expired.json"));
  transport_->push(fixture_answer("200-list-trainingjobs.json"));
  const ListResult result = client().list_all(
      trainingjobs(), "default", with<ListOptions>([](ListOptions& o) { o.limit = 1; }));
  ASSERT_EQ(transport_->request_count(), 3u);
  EXPECT_EQ(transport_->request(2).target,
            "/apis/tessel.dev/v1alpha1/namespaces/default/trainingjobs");
  const json full = fixture_body("200-list-trainingjobs.json");
  EXPECT_EQ(result.items.size(), full["items"].size());
  EXPECT_EQ(result.resource_version, full["metadata"]["resourceVersion"]);
}

TEST_F(ClientTest, ListAllDoesNotHideAGoneFirstPage) {
  transport_->push(fixture_answer("410-list-exact-rv-compacted.json"));
  try {
    client().list_all(trainingjobs(), "default", with<ListOptions>([](ListOptions& o) {
                        o.resource_version = "5";
                        o.resource_version_match = "Exact";
                      }));
    FAIL() << "expected ApiError";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_gone());
  }
}

TEST_F(ClientTest, WarningHeadersAreLogged) {
  transport_->push(fixture_answer("201-create-unknown-field-warn.json"));
  client().create(trainingjobs(), "default", request_body("201-create-unknown-field-warn.json"),
                  with<WriteOptions>([](WriteOptions& o) { o.field_validation = "Warn"; }));
  int warnings = 0;
  for (const auto& line : log_lines()) {
    if (line.find("level=warning") != std::string::npos &&
        line.find("unknown field \\\"spec.fooBar\\\"") != std::string::npos) {
      ++warnings;
    }
    if (line.find("unknown field \\\"topLevelJunk\\\"") != std::string::npos) ++warnings;
  }
  EXPECT_EQ(warnings, 2);
}

TEST_F(ClientTest, WritesRefuseObjectsInTheWrongPlace) {
  json job = request_body("201-create-trainingjob.json");
  EXPECT_THROW(client().create(trainingjobs(), "other", job), std::invalid_argument);
  job["metadata"].erase("namespace");
  EXPECT_THROW(client().update(trainingjobs(), job), std::invalid_argument);
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n"}}}};
  EXPECT_THROW(client().create(resource("", "nodes"), "default", node), std::invalid_argument);
  EXPECT_THROW(client().patch(trainingjobs(), "default", "gpt-a", PatchType::kMerge, json::object(),
                              with<PatchOptions>([](PatchOptions& o) { o.force = true; })),
               std::invalid_argument);
  EXPECT_EQ(transport_->request_count(), 0u);
}

TEST_F(ClientTest, DeleteOptionsCarryPreconditionsAndDryRun) {
  transport_->push(fixture_answer("200-delete-trainingjob.json"));
  client().remove(trainingjobs(), "default", "gpt-gc", with<DeleteOptions>([](DeleteOptions& o) {
                    o.precondition_uid = "u-1";
                    o.precondition_resource_version = "42";
                    o.dry_run = true;
                  }));
  EXPECT_EQ(json::parse(transport_->request(0).body),
            (json{{"preconditions", {{"uid", "u-1"}, {"resourceVersion", "42"}}},
                  {"dryRun", json::array({"All"})}}));
  EXPECT_EQ(header_of(transport_->request(0), "Content-Type"), "application/json");
}

TEST_F(ClientTest, ApplyUsesTheDefaultFieldManagerAndForces) {
  options_.field_manager = "tessel-operator";
  transport_->push(fixture_answer("200-ssa-status-apply.json"));
  const json object = request_body("200-ssa-status-apply.json");
  client().apply(trainingjobs(), object, {}, "status");
  expect_fixture_request(transport_->request(0), "200-ssa-status-apply.json");
}

// --- watch ------------------------------------------------------------------------------------

TEST_F(ClientTest, WatchDeliversTheCapturedStreamInOrder) {
  transport_->push(watch_body(fixture_text("watch-stream-bookmark.jsonl")));
  std::vector<std::string> types;
  const WatchResult result =
      client().watch(trainingjobs(), "default", with<ListOptions>([](ListOptions& o) {
                       o.resource_version = "351";
                       o.allow_watch_bookmarks = true;
                       o.timeout_seconds = 100;
                     }),
                     [&](const WatchEvent& event) {
                       types.emplace_back(to_string(event.type));
                       return true;
                     });
  EXPECT_EQ(result.end, WatchResult::End::kServerClosed);
  EXPECT_EQ(result.events, 6);
  EXPECT_EQ(types, (std::vector<std::string>{"ADDED", "MODIFIED", "MODIFIED", "DELETED", "BOOKMARK",
                                             "BOOKMARK"}));
  const HttpRequest request = transport_->request(0);
  EXPECT_EQ(target_path(request.target),
            "/apis/tessel.dev/v1alpha1/namespaces/default/trainingjobs");
  EXPECT_EQ(target_query(request.target),
            (std::vector<std::pair<std::string, std::string>>{{"resourceVersion", "351"},
                                                              {"watch", "true"},
                                                              {"allowWatchBookmarks", "true"},
                                                              {"timeoutSeconds", "100"}}));
  EXPECT_GT(request.timeout, std::chrono::seconds(100));  // longer than the server's own end
}

TEST_F(ClientTest, WatchHandsAnExpiredErrorEventToTheCaller) {
  transport_->push(watch_body(fixture_text("watch-410-expired-too-old-rv.jsonl")));
  std::optional<ApiError> error;
  const WatchResult result =
      client().watch(trainingjobs(), "default",
                     with<ListOptions>([](ListOptions& o) { o.resource_version = "100"; }),
                     [&](const WatchEvent& event) {
                       if (event.type == WatchEvent::Error)
                         error = ApiError::from_status(event.object);
                       return true;
                     });
  EXPECT_EQ(result.end, WatchResult::End::kServerClosed);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), 410);
  EXPECT_TRUE(error->is_gone());
}

TEST_F(ClientTest, WatchErrorAnswerIsThrown) {
  json gone = {{"kind", "Status"}, {"code", 410}, {"reason", "Expired"}, {"message", "too old"}};
  transport_->push(answer(410, gone));
  try {
    client().watch(trainingjobs(), "default",
                   with<ListOptions>([](ListOptions& o) { o.resource_version = "1"; }),
                   [](const WatchEvent&) { return true; });
    FAIL() << "expected ApiError";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_gone());
  }
}

TEST_F(ClientTest, WatchReportsABodyThatIsNotAWatchStream) {
  transport_->push(watch_body(watch_line("ADDED", {{"metadata", {{"name", "a"}}}}) + "not json\n"));
  int events = 0;
  const WatchResult result = client().watch(trainingjobs(), "default", {},
                                            [&](const WatchEvent&) { return ++events, true; });
  EXPECT_EQ(result.end, WatchResult::End::kDecodeError);
  EXPECT_EQ(events, 1);  // the good event before the bad line was delivered
  EXPECT_FALSE(result.detail.empty());
}

TEST_F(ClientTest, WatchReportsAStreamCutInsideAnEvent) {
  transport_->push(watch_body(R"({"type":"ADDED","obj)"));
  const WatchResult result =
      client().watch(trainingjobs(), "default", {}, [](const WatchEvent&) { return true; });
  EXPECT_EQ(result.end, WatchResult::End::kDecodeError);
}

TEST_F(ClientTest, WatchEndsWhenTheHandlerSaysSo) {
  transport_->push(watch_body(fixture_text("watch-stream-pods.jsonl")));
  const WatchResult result =
      client().watch(resource("", "pods"), "default", {}, [](const WatchEvent&) { return false; });
  EXPECT_EQ(result.end, WatchResult::End::kHandlerStopped);
  EXPECT_EQ(result.events, 1);
}

TEST_F(ClientTest, WatchStopsPromptlyOnAnIdleStream) {
  testing::Scripted idle = watch_body(fixture_text("watch-stream-nodes.jsonl"));
  idle.hold_open = true;
  transport_->push(idle);
  std::stop_source stop;
  auto watching = std::async(std::launch::async, [&] {
    return client().watch(
        resource("", "nodes"), "", {}, [](const WatchEvent&) { return true; }, stop.get_token());
  });
  ASSERT_TRUE(transport_->wait_for_open_streams(1));
  stop.request_stop();
  ASSERT_EQ(watching.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const WatchResult result = watching.get();
  EXPECT_EQ(result.end, WatchResult::End::kStopped);
  EXPECT_EQ(result.events, 3);
}

TEST_F(ClientTest, AWatchStoppedBeforeTheServerAnsweredEndsStopped) {
  std::stop_source stop;
  stop.request_stop();
  const WatchResult result = client().watch(
      resource("", "nodes"), "", {}, [](const WatchEvent&) { return true; }, stop.get_token());
  EXPECT_EQ(result.end, WatchResult::End::kStopped);
  EXPECT_EQ(result.events, 0);
}

TEST_F(ClientTest, WatchBrokenMidStreamThrowsTheTransportError) {
  testing::Scripted broken = watch_body(fixture_text("watch-stream-bookmark.jsonl").substr(0, 10));
  broken.error.emplace("connection reset by peer", false, true);
  transport_->push(broken);
  EXPECT_THROW(
      client().watch(trainingjobs(), "default", {}, [](const WatchEvent&) { return true; }),
      TransportError);
}

TEST_F(ClientTest, WatchHandlerExceptionsReachTheCaller) {
  transport_->push(watch_body(fixture_text("watch-stream-bookmark.jsonl")));
  EXPECT_THROW(
      client().watch(trainingjobs(), "default", {},
                     [](const WatchEvent&) -> bool { throw std::domain_error("handler"); }),
      std::domain_error);
}

// A port on 127.0.0.1 that nothing listens on: bound by the kernel's choice, then released.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("cannot bind a socket on 127.0.0.1");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

TEST(ClientFromConfigTest, TalksThroughTheCurlTransport) {
  ClusterConfig config;
  config.name = "test";
  config.server = "http://127.0.0.1:" + std::to_string(closed_port());
  ClientOptions options;
  options.backoff.steps = 2;
  int sleeps = 0;
  options.sleeper = [&](std::chrono::nanoseconds) { ++sleeps; };
  options.logger =
      std::make_shared<const Logger>("test", LogLevel::kError, [](std::string_view) {});
  const std::shared_ptr<Client> client = Client::from_config(config, options);
  // Refused: never sent, so even a GET is retried once before the error comes back.
  EXPECT_THROW(client->get(trainingjobs(), "default", "gpt-a"), TransportError);
  EXPECT_EQ(sleeps, 1);
}

}  // namespace
}  // namespace tessel::kube
