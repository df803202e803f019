#include "kube/informer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kube/clock.h"
#include "tests/kube/custom_resources.h"
#include "tests/kube/fake_transport.h"
#include "tests/kube/waiting.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using testing::answer;
using testing::eventually;
using testing::require;
using testing::Scripted;
using testing::watch_body;
using testing::watch_line;

const ResourceInfo& trainingjobs() { return testing::trainingjobs_resource(); }

json job(const std::string& name, const std::string& rv, int replicas = 1) {
  return {{"apiVersion", "tessel.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"resourceVersion", rv}}},
          {"spec", {{"replicas", replicas}}}};
}

json job_list(const std::string& rv, const std::vector<json>& items) {
  return {{"kind", "TrainingJobList"}, {"metadata", {{"resourceVersion", rv}}}, {"items", items}};
}

Scripted idle_watch() {
  Scripted scripted = watch_body("");
  scripted.hold_open = true;
  return scripted;
}

// What a consumer of the handlers believes the cache holds.
class Mirror {
 public:
  EventHandler handler() {
    return EventHandler{
        .on_add = [this](const json& o) { set(object_key(o), o); },
        .on_update = [this](const json&, const json& o) { set(object_key(o), o); },
        .on_delete =
            [this](const json& o, bool) {
              std::lock_guard lock(mutex_);
              objects_.erase(object_key(o));
              ++deletes_;
            },
    };
  }
  std::map<std::string, json> objects() {
    std::lock_guard lock(mutex_);
    return objects_;
  }
  int updates() {
    std::lock_guard lock(mutex_);
    return updates_;
  }

 private:
  void set(const std::string& key, const json& object) {
    std::lock_guard lock(mutex_);
    if (objects_.contains(key)) ++updates_;
    objects_[key] = object;
  }

  std::mutex mutex_;
  std::map<std::string, json> objects_;
  int updates_ = 0;
  int deletes_ = 0;
};

std::map<std::string, json> store_content(const ObjectStore& store) {
  std::map<std::string, json> content;
  for (const auto& object : store.list()) content[object_key(*object)] = *object;
  return content;
}

class InformerTest : public ::testing::Test {
 protected:
  InformerTest() {
    ClientOptions client_options;
    client_options.qps = 0;
    client_options.backoff.steps = 1;
    client_options.logger = quiet_;
    client_ = std::make_unique<Client>(transport_, client_options);
    options_.reflector.backoff.initial = std::chrono::milliseconds(1);
    options_.reflector.backoff.cap = std::chrono::milliseconds(2);
    options_.reflector.logger = quiet_;
  }

  std::unique_ptr<SharedInformer> make_informer() {
    return std::make_unique<SharedInformer>(*client_, trainingjobs(), "default", options_);
  }

  std::shared_ptr<const Logger> quiet_ =
      std::make_shared<const Logger>("test", LogLevel::kError, [](std::string_view) {});
  std::shared_ptr<testing::FakeTransport> transport_ = std::make_shared<testing::FakeTransport>();
  std::unique_ptr<Client> client_;
  InformerOptions options_;
};

// Broken watches, a watch that ends, an expired version and a relist that finds changes made
// while the watch was down: afterwards the cache equals the server's state, and the handlers
// told their consumer exactly that state.
TEST_F(InformerTest, CacheMatchesTheServerAfterInjectedFaults) {
  transport_->push(answer(200, job_list("3", {job("a", "1"), job("b", "2"), job("c", "3")})));
  Scripted broken = watch_body(watch_line("MODIFIED", job("a", "4", 2)));
  broken.error.emplace("connection reset by peer", false, true);
  transport_->push(broken);
  transport_->push(
      watch_body(watch_line("DELETED", job("b", "5")) + watch_line("ADDED", job("d", "6"))));
  transport_->push(watch_body(watch_line(
      "ERROR", {{"kind", "Status"}, {"code", 410}, {"reason", "Expired"}, {"message", "gone"}})));
  const std::vector<json> server = {job("a", "4", 2), job("c", "7", 5), job("d", "6"),
                                    job("e", "8")};
  transport_->push(answer(200, job_list("8", server)));
  transport_->push(idle_watch());

  Mirror mirror;
  auto informer = make_informer();
  informer->add_event_handler(mirror.handler());
  informer->start();
  require(transport_->wait_for_open_streams(1), "the watch after the relist");

  std::map<std::string, json> expected;
  for (const json& object : server) expected[object_key(object)] = object;
  EXPECT_EQ(store_content(informer->store()), expected);
  EXPECT_EQ(mirror.objects(), expected);
  EXPECT_EQ(informer->reflector().lists(), 2);
  EXPECT_EQ(informer->store().resource_version(), "8");
}

TEST_F(InformerTest, HandlersAddedLaterHearOfTheCachedObjects) {
  transport_->push(answer(200, job_list("3", {job("a", "1"), job("b", "2")})));
  transport_->push(idle_watch());
  auto informer = make_informer();
  informer->start();
  std::stop_source never;
  ASSERT_TRUE(informer->wait_for_sync(never.get_token()));
  Mirror late;
  informer->add_event_handler(late.handler());
  EXPECT_EQ(late.objects().size(), 2u);
}

TEST_F(InformerTest, ResyncsPeriodically) {
  FakeClock clock;
  options_.reflector.clock = &clock;
  options_.resync_period = std::chrono::seconds(30);
  transport_->push(answer(200, job_list("3", {job("a", "1"), job("b", "2")})));
  transport_->push(idle_watch());
  Mirror mirror;
  auto informer = make_informer();
  informer->add_event_handler(mirror.handler());
  informer->start();
  require(transport_->wait_for_open_streams(1), "the watch");
  require(clock.await_waiters(1, std::chrono::seconds(5)), "the resync wait");
  EXPECT_EQ(mirror.updates(), 0);
  clock.advance(std::chrono::seconds(30));
  require(eventually([&] { return mirror.updates() == 2; }), "one resync of two objects");
  require(clock.await_waiters(1, std::chrono::seconds(5)), "the next resync wait");
  clock.advance(std::chrono::seconds(30));
  require(eventually([&] { return mirror.updates() == 4; }), "a second resync");
}

TEST_F(InformerTest, StartsOnceAndStopsIdempotently) {
  transport_->push(answer(200, job_list("3", {})));
  transport_->push(idle_watch());
  auto informer = make_informer();
  informer->start();
  EXPECT_THROW(informer->start(), std::logic_error);
  require(transport_->wait_for_open_streams(1), "the watch");
  informer->stop();
  informer->stop();
  EXPECT_EQ(transport_->request_count(), 2u);
}

TEST_F(InformerTest, RefusesANegativeResyncPeriod) {
  options_.resync_period = -std::chrono::seconds(1);
  EXPECT_THROW(make_informer(), std::invalid_argument);
}

TEST_F(InformerTest, IndexesWork) {
  transport_->push(
      answer(200, job_list("3", {job("a", "1", 2), job("b", "2", 4), job("c", "3", 2)})));
  transport_->push(idle_watch());
  auto informer = make_informer();
  informer->add_index("replicas", [](const json& o) {
    return std::vector<std::string>{std::to_string(o["spec"]["replicas"].get<int>())};
  });
  informer->start();
  require(transport_->wait_for_open_streams(1), "the watch");
  EXPECT_EQ(informer->store().by_index("replicas", "2").size(), 2u);
}

}  // namespace
}  // namespace tessel::kube
