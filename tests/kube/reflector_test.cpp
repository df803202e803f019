#include "kube/reflector.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kube/clock.h"
#include "tests/kube/custom_resources.h"
#include "tests/kube/fake_transport.h"
#include "tests/kube/fixtures.h"
#include "tests/kube/recorded_request.h"
#include "tests/kube/waiting.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using testing::answer;
using testing::fixture_answer;
using testing::fixture_text;
using testing::require;
using testing::Scripted;
using testing::target_path;
using testing::target_query;
using testing::watch_body;
using testing::watch_line;

using Query = std::vector<std::pair<std::string, std::string>>;

const ResourceInfo& trainingjobs() { return testing::trainingjobs_resource(); }

json job(const std::string& name, const std::string& rv) {
  return {{"apiVersion", "tessel.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"resourceVersion", rv}}}};
}

json job_list(const std::string& rv, const std::vector<json>& items) {
  return {{"kind", "TrainingJobList"},
          {"apiVersion", "tessel.dev/v1alpha1"},
          {"metadata", {{"resourceVersion", rv}}},
          {"items", items}};
}

json bookmark(const std::string& rv) {
  return {{"kind", "TrainingJob"},
          {"apiVersion", "tessel.dev/v1alpha1"},
          {"metadata", {{"resourceVersion", rv}}}};
}

Scripted idle_watch() {
  Scripted scripted = watch_body("");
  scripted.hold_open = true;
  return scripted;
}

std::string query_value(const HttpRequest& request, const std::string& key) {
  for (const auto& [k, v] : target_query(request.target)) {
    if (k == key) return v;
  }
  return "<absent>";
}

std::vector<std::string> stored_names(const ObjectStore& store) {
  std::vector<std::string> names;
  for (const auto& object : store.list()) names.push_back(object_name(*object));
  return names;
}

class ReflectorTest : public ::testing::Test {
 protected:
  ReflectorTest() {
    ClientOptions client_options;
    client_options.qps = 0;
    client_options.backoff.steps = 1;  // the reflector's own retries are under test
    client_options.logger = quiet_;
    client_ = std::make_unique<Client>(transport_, client_options);
    options_.backoff.initial = std::chrono::milliseconds(1);
    options_.backoff.cap = std::chrono::milliseconds(2);
    options_.logger = quiet_;
    store_.add_handler(EventHandler{
        .on_add = [this](const json& o) { note("add " + object_name(o)); },
        .on_update = [this](const json&, const json& o) { note("update " + object_name(o)); },
        .on_delete =
            [this](const json& o, bool unknown) {
              note(std::string(unknown ? "tombstone " : "delete ") + object_name(o));
            },
    });
  }

  ~ReflectorTest() override { stop(); }

  void start() {
    reflector_ = std::make_unique<Reflector>(*client_, trainingjobs(), "default", store_, options_);
    thread_ = std::jthread([this](std::stop_token stop) { reflector_->run(stop); });
  }

  void stop() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }

  void note(const std::string& what) {
    std::lock_guard lock(mutex_);
    notes_.push_back(what);
  }
  std::vector<std::string> notes() {
    std::lock_guard lock(mutex_);
    return notes_;
  }

  std::shared_ptr<const Logger> quiet_ =
      std::make_shared<const Logger>("test", LogLevel::kError, [](std::string_view) {});
  std::shared_ptr<testing::FakeTransport> transport_ = std::make_shared<testing::FakeTransport>();
  std::unique_ptr<Client> client_;
  ObjectStore store_;
  ReflectorOptions options_;
  std::unique_ptr<Reflector> reflector_;
  std::jthread thread_;
  std::mutex mutex_;
  std::vector<std::string> notes_;
};

TEST_F(ReflectorTest, ListsThenWatchesResumingFromTheLastVersionSeen) {
  transport_->push(fixture_answer("200-list-trainingjobs.json"));
  transport_->push(watch_body(fixture_text("watch-stream-bookmark.jsonl")));
  transport_->push(watch_body(watch_line("BOOKMARK", bookmark("400"))));
  transport_->push(idle_watch());
  start();
  require(transport_->wait_for_open_streams(1), "the third watch");

  const auto requests = transport_->requests();
  ASSERT_EQ(requests.size(), 4u);
  // A consistent list (no resourceVersion), paginated.
  EXPECT_EQ(target_path(requests[0].target),
            "/apis/tessel.dev/v1alpha1/namespaces/default/trainingjobs");
  EXPECT_EQ(target_query(requests[0].target), (Query{{"limit", "500"}}));
  // Watches resume from the list's version, then from the last event, then from a bookmark.
  EXPECT_EQ(query_value(requests[1], "resourceVersion"), "351");
  EXPECT_EQ(query_value(requests[2], "resourceVersion"), "364");
  EXPECT_EQ(query_value(requests[3], "resourceVersion"), "400");
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(query_value(requests[i], "watch"), "true");
    EXPECT_EQ(query_value(requests[i], "allowWatchBookmarks"), "true");
    const int timeout = std::stoi(query_value(requests[i], "timeoutSeconds"));
    EXPECT_GE(timeout, 300);
    EXPECT_LT(timeout, 600);
  }
  EXPECT_TRUE(reflector_->has_synced());
  EXPECT_EQ(reflector_->lists(), 1);
  EXPECT_EQ(reflector_->last_resource_version(), "400");
  EXPECT_EQ(stored_names(store_), (std::vector<std::string>{"gpt-a", "gpt-b", "gpt-c"}));
  EXPECT_EQ(notes(), (std::vector<std::string>{"add gpt-a", "add gpt-b", "add gpt-c", "add gpt-w",
                                               "update gpt-w", "update gpt-w", "delete gpt-w"}));
}

TEST_F(ReflectorTest, WatchTimeoutsDiffer) {
  options_.seed = 42;
  transport_->push(answer(200, job_list("10", {})));
  for (int i = 0; i < 4; ++i) {
    transport_->push(watch_body(watch_line("BOOKMARK", bookmark(std::to_string(11 + i)))));
  }
  transport_->push(idle_watch());
  start();
  require(transport_->wait_for_open_streams(1), "the last watch");
  std::set<std::string> timeouts;
  for (std::size_t i = 1; i < transport_->request_count(); ++i) {
    timeouts.insert(query_value(transport_->request(i), "timeoutSeconds"));
  }
  EXPECT_GT(timeouts.size(), 1u);
}

TEST_F(ReflectorTest, SelectorsRestrictListAndWatch) {
  options_.selectors.label_selector = "tessel.dev/team=llm";
  options_.selectors.field_selector = "metadata.name=gpt-a";
  options_.selectors.limit = 7;  // not a selector: ignored
  transport_->push(answer(200, job_list("10", {})));
  transport_->push(idle_watch());
  start();
  require(transport_->wait_for_open_streams(1), "the watch");
  for (const HttpRequest& request : transport_->requests()) {
    EXPECT_EQ(query_value(request, "labelSelector"), "tessel.dev/team=llm");
    EXPECT_EQ(query_value(request, "fieldSelector"), "metadata.name=gpt-a");
  }
  EXPECT_EQ(query_value(transport_->request(0), "limit"), "500");
  EXPECT_EQ(query_value(transport_->request(1), "limit"), "<absent>");
}

TEST_F(ReflectorTest, RelistsAfterAnExpiredErrorEvent) {
  transport_->push(fixture_answer("200-list-trainingjobs.json"));
  transport_->push(watch_body(fixture_text("watch-410-expired-too-old-rv.jsonl")));
  // The relist finds gpt-a changed, gpt-b deleted while the watch was down, gpt-c unchanged.
  const json listed = testing::fixture_body("200-list-trainingjobs.json");
  json changed_a = listed["items"][0];
  changed_a["metadata"]["resourceVersion"] = "500";
  changed_a["spec"]["replicas"] = 9;
  transport_->push(answer(200, job_list("500", {changed_a, listed["items"][2]})));
  transport_->push(idle_watch());
  start();
  require(transport_->wait_for_open_streams(1), "the watch after the relist");

  EXPECT_EQ(reflector_->lists(), 2);
  EXPECT_EQ(query_value(transport_->request(2), "watch"), "<absent>");
  EXPECT_EQ(query_value(transport_->request(2), "resourceVersion"), "<absent>");
  EXPECT_EQ(query_value(transport_->request(3), "resourceVersion"), "500");
  EXPECT_EQ(stored_names(store_), (std::vector<std::string>{"gpt-a", "gpt-c"}));
  EXPECT_EQ((*store_.get("default/gpt-a"))["spec"]["replicas"], 9);
  const auto seen = notes();
  ASSERT_GE(seen.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(seen.begin() + 3, seen.end()),
            (std::vector<std::string>{"update gpt-a", "tombstone gpt-b"}));
}

TEST_F(ReflectorTest, RelistsAfterAGoneAnswerToTheWatch) {
  transport_->push(answer(200, job_list("10", {job("a", "10")})));
  transport_->push(answer(
      410, {{"kind", "Status"}, {"code", 410}, {"reason", "Expired"}, {"message", "too old"}}));
  transport_->push(answer(200, job_list("20", {job("b", "20")})));
  transport_->push(idle_watch());
  start();
  require(transport_->wait_for_open_streams(1), "the watch after the relist");
  EXPECT_EQ(reflector_->lists(), 2);
  EXPECT_EQ(query_value(transport_->request(3), "resourceVersion"), "20");
  EXPECT_EQ(stored_names(store_), (std::vector<std::string>{"b"}));
}

TEST_F(ReflectorTest, ResumesABrokenWatchWithoutListing) {
  transport_->push(answer(200, job_list("10", {})));
  Scripted broken =
      watch_body(watch_line("ADDED", job("a", "11")) + watch_line("MODIFIED", job("a", "12")));
  broken.error.emplace("connection reset by peer", false, true);
  transport_->push(broken);
  transport_->push(testing::transport_failure("connection refused", false, false));
  transport_->push(idle_watch());
  start();
  require(transport_->wait_for_open_streams(1), "the resumed watch");
  EXPECT_EQ(reflector_->lists(), 1);
  EXPECT_EQ(reflector_->failures(), 2);
  EXPECT_EQ(query_value(transport_->request(2), "resourceVersion"), "12");
  EXPECT_EQ(query_value(transport_->request(3), "resourceVersion"), "12");
  EXPECT_EQ(stored_names(store_), (std::vector<std::string>{"a"}));
}

TEST_F(ReflectorTest, ANonExpiredErrorEventRewatchesFromTheSameVersion) {
  transport_->push(answer(200, job_list("10", {})));
  transport_->push(watch_body(
      watch_line("ERROR", {{"kind", "Status"}, {"code", 500}, {"reason", "InternalError"}})));
  transport_->push(idle_watch());
  start();
  require(transport_->wait_for_open_streams(1), "the second watch");
  EXPECT_EQ(reflector_->lists(), 1);
  EXPECT_EQ(reflector_->failures(), 1);
  EXPECT_EQ(query_value(transport_->request(2), "resourceVersion"), "10");
}

TEST_F(ReflectorTest, ListFailuresBackOffAndRetry) {
  transport_->push(answer(500, {{"kind", "Status"}, {"code", 500}}));
  transport_->push(fixture_answer("403-forbidden-serviceaccount-list.json"));
  transport_->push(answer(200, job_list("10", {job("a", "10")})));
  transport_->push(idle_watch());
  start();
  require(transport_->wait_for_open_streams(1), "the watch");
  EXPECT_EQ(reflector_->failures(), 2);
  EXPECT_EQ(reflector_->lists(), 1);
  EXPECT_TRUE(reflector_->has_synced());
}

TEST_F(ReflectorTest, AWatchClosedAtOnceWithoutEventsIsBackedOff) {
  FakeClock clock;
  options_.clock = &clock;
  options_.backoff = reflector_backoff();
  transport_->push(answer(200, job_list("10", {})));
  transport_->push(watch_body(""));
  transport_->push(idle_watch());
  start();
  require(clock.await_waiters(1, std::chrono::seconds(5)), "the backoff wait");
  EXPECT_EQ(transport_->request_count(), 2u);
  EXPECT_EQ(reflector_->failures(), 1);
  clock.advance(std::chrono::milliseconds(1600));  // 800 ms, jitter up to 1.0
  require(transport_->wait_for_open_streams(1), "the second watch");
  EXPECT_EQ(query_value(transport_->request(2), "resourceVersion"), "10");
}

TEST_F(ReflectorTest, RetryAfterOfARefusedWatchIsHonoured) {
  FakeClock clock;
  options_.clock = &clock;
  transport_->push(answer(200, job_list("10", {})));
  transport_->push(
      answer(429, {{"kind", "Status"}, {"code", 429}, {"details", {{"retryAfterSeconds", 5}}}}));
  transport_->push(idle_watch());
  start();
  require(clock.await_waiters(1, std::chrono::seconds(5)), "the wait");
  clock.advance(std::chrono::seconds(4));
  require(clock.await_waiters(1, std::chrono::seconds(5)), "the wait, still");
  EXPECT_EQ(transport_->request_count(), 2u);
  clock.advance(std::chrono::seconds(1));
  require(transport_->wait_for_open_streams(1), "the second watch");
}

TEST_F(ReflectorTest, StopsPromptlyWhileBackingOff) {
  FakeClock clock;
  options_.clock = &clock;
  options_.backoff = reflector_backoff();
  transport_->push(answer(500, {{"kind", "Status"}, {"code", 500}}));
  start();
  require(clock.await_waiters(1, std::chrono::seconds(5)), "the backoff wait");
  auto stopped = std::async(std::launch::async, [this] { stop(); });
  require(testing::finishes(stopped), "stop during backoff");
  EXPECT_FALSE(reflector_->has_synced());
}

TEST_F(ReflectorTest, StopsPromptlyWhileWatching) {
  transport_->push(answer(200, job_list("10", {})));
  transport_->push(idle_watch());
  start();
  require(transport_->wait_for_open_streams(1), "the watch");
  auto stopped = std::async(std::launch::async, [this] { stop(); });
  require(testing::finishes(stopped), "stop during a watch");
  EXPECT_EQ(transport_->request_count(), 2u);
}

TEST_F(ReflectorTest, WaitForSyncReturnsOnceListedOrStopped) {
  transport_->push(answer(200, job_list("10", {})));
  transport_->push(idle_watch());
  start();
  std::stop_source never;
  EXPECT_TRUE(reflector_->wait_for_sync(never.get_token()));

  Reflector unsynced(*client_, trainingjobs(), "default", store_, options_);
  std::stop_source stop;
  auto waiting =
      std::async(std::launch::async, [&] { return unsynced.wait_for_sync(stop.get_token()); });
  stop.request_stop();
  require(testing::finishes(waiting), "wait_for_sync after stop");
  EXPECT_FALSE(waiting.get());
}

}  // namespace
}  // namespace tessel::kube
