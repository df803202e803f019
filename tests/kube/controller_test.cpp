#include "kube/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kube/clock.h"
#include "kube/rate_limiter.h"
#include "tests/kube/custom_resources.h"
#include "tests/kube/fake_transport.h"
#include "tests/kube/waiting.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using testing::eventually;
using testing::require;

std::shared_ptr<const Logger> quiet() {
  return std::make_shared<const Logger>("test", LogLevel::kError, [](std::string_view) {});
}

// Fast backoff on the real clock, for tests that only count requeues.
ControllerOptions fast_options(int workers = 1) {
  ControllerOptions options;
  options.workers = workers;
  options.rate_limiter = std::make_unique<ItemExponentialFailureRateLimiter>(
      std::chrono::milliseconds(1), std::chrono::milliseconds(4));
  options.logger = quiet();
  return options;
}

// Records every reconcile by key.
class Calls {
 public:
  void add(const std::string& key) {
    std::lock_guard lock(mutex_);
    ++count_[key];
    ++total_;
  }
  int of(const std::string& key) {
    std::lock_guard lock(mutex_);
    return count_[key];
  }
  int total() {
    std::lock_guard lock(mutex_);
    return total_;
  }
  std::set<std::string> keys() {
    std::lock_guard lock(mutex_);
    std::set<std::string> keys;
    for (const auto& [key, n] : count_) keys.insert(key);
    return keys;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, int> count_;
  int total_ = 0;
};

TEST(ControllerTest, ReconcilesEveryObjectOfTheWatchedInformerAfterItSynced) {
  auto transport = std::make_shared<testing::FakeTransport>();
  ClientOptions client_options;
  client_options.qps = 0;
  client_options.logger = quiet();
  Client client(transport, client_options);
  const json list = {{"kind", "TrainingJobList"},
                     {"metadata", {{"resourceVersion", "9"}}},
                     {"items",
                      {{{"metadata", {{"name", "a"}, {"namespace", "default"}}}},
                       {{"metadata", {{"name", "b"}, {"namespace", "default"}}}},
                       {{"metadata", {{"name", "c"}, {"namespace", "other"}}}}}}};
  transport->push(testing::answer(200, list));
  testing::Scripted idle = testing::watch_body("");
  idle.hold_open = true;
  transport->push(idle);

  InformerOptions informer_options;
  informer_options.reflector.logger = quiet();
  SharedInformer informer(client, testing::trainingjobs_resource(), "", informer_options);
  Calls calls;
  std::atomic<bool> synced_when_called{true};
  Controller controller(
      [&](const std::string& key) {
        if (!informer.has_synced()) synced_when_called = false;
        calls.add(key);
        return ReconcileResult{};
      },
      fast_options(2));
  controller.watch(informer);
  informer.start();
  std::jthread running([&](std::stop_token stop) { controller.run(stop); });
  require(eventually([&] { return calls.total() == 3; }), "three reconciles");
  EXPECT_EQ(calls.keys(), (std::set<std::string>{"default/a", "default/b", "other/c"}));
  EXPECT_TRUE(synced_when_called);
  running.request_stop();
  running.join();
  informer.stop();
}

TEST(ControllerTest, ExceptionsRequeueWithBackoffAndSuccessForgets) {
  Calls calls;
  std::atomic<int> failures_left{2};
  Controller controller(
      [&](const std::string& key) {
        calls.add(key);
        if (failures_left-- > 0) throw std::runtime_error("placement failed");
        return ReconcileResult{};
      },
      fast_options());
  controller.queue().add("default/a");
  std::jthread running([&](std::stop_token stop) { controller.run(stop); });
  require(eventually([&] { return controller.reconciles() == 3; }), "three reconciles");
  EXPECT_EQ(controller.errors(), 2);
  EXPECT_EQ(controller.queue().num_requeues("default/a"), 0);  // forgotten on success
}

TEST(ControllerTest, RequeueAsksForAnotherRateLimitedRound) {
  Calls calls;
  Controller controller(
      [&](const std::string& key) {
        calls.add(key);
        return ReconcileResult{.requeue = calls.of(key) < 3};
      },
      fast_options());
  controller.queue().add("k");
  std::jthread running([&](std::stop_token stop) { controller.run(stop); });
  require(eventually([&] { return controller.reconciles() == 3; }), "three reconciles");
  EXPECT_EQ(controller.errors(), 0);
  EXPECT_EQ(controller.queue().num_requeues("k"), 0);
}

TEST(ControllerTest, RequeueAfterWaitsThatLong) {
  FakeClock clock;
  ControllerOptions options = fast_options();
  options.clock = &clock;
  Calls calls;
  Controller controller(
      [&](const std::string& key) {
        calls.add(key);
        return ReconcileResult{.requeue = false,
                               .requeue_after = calls.of(key) == 1 ? std::chrono::seconds(10)
                                                                   : Clock::duration::zero()};
      },
      std::move(options));
  controller.queue().add("k");
  std::jthread running([&](std::stop_token stop) { controller.run(stop); });
  require(eventually([&] { return calls.total() == 1; }), "the first reconcile");
  require(clock.await_waiters(1, std::chrono::seconds(5)), "the worker waiting");
  clock.advance(std::chrono::seconds(9));
  require(clock.await_waiters(1, std::chrono::seconds(5)), "the worker waiting again");
  EXPECT_EQ(calls.total(), 1);
  clock.advance(std::chrono::seconds(1));
  require(eventually([&] { return calls.total() == 2; }), "the requeued reconcile");
}

// While one worker holds a key, adding it again neither hands it to another worker nor loses
// the update: it is reconciled once more afterwards. Other keys go to the other workers.
TEST(ControllerTest, NoTwoWorkersReconcileOneKey) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> inside_a{0};
  std::atomic<int> most_inside_a{0};
  Calls calls;
  Controller controller(
      [&](const std::string& key) {
        if (key == "a") {
          const int now = ++inside_a;
          most_inside_a = std::max(most_inside_a.load(), now);
          if (calls.of("a") == 0) {
            calls.add(key);
            released.wait();
          } else {
            calls.add(key);
          }
          --inside_a;
        } else {
          calls.add(key);
        }
        return ReconcileResult{};
      },
      fast_options(4));
  controller.queue().add("a");
  std::jthread running([&](std::stop_token stop) { controller.run(stop); });
  require(eventually([&] { return calls.of("a") == 1; }), "the first reconcile of a");
  for (int i = 0; i < 3; ++i) controller.queue().add("a");
  controller.queue().add("b");
  require(eventually([&] { return calls.of("b") == 1; }), "b on another worker");
  EXPECT_EQ(calls.of("a"), 1);
  release.set_value();
  require(eventually([&] { return calls.of("a") == 2; }), "a once more");
  running.request_stop();
  running.join();
  EXPECT_EQ(calls.of("a"), 2);
  EXPECT_EQ(most_inside_a.load(), 1);
}

TEST(ControllerTest, ShutdownWaitsForReconcilesInProgress) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> finished{false};
  Controller controller(
      [&](const std::string&) {
        released.wait();
        finished = true;
        return ReconcileResult{};
      },
      fast_options(2));
  controller.queue().add("a");
  std::stop_source stop;
  auto running = std::async(std::launch::async, [&] { controller.run(stop.get_token()); });
  require(eventually([&] { return controller.queue().size() == 0; }), "a taken by a worker");
  stop.request_stop();
  EXPECT_EQ(running.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);
  release.set_value();
  require(testing::finishes(running), "run() after the reconcile returned");
  EXPECT_TRUE(finished);
  EXPECT_TRUE(controller.queue().shutting_down());
}

TEST(ControllerTest, RunReturnsWhenStoppedBeforeTheInformerSynced) {
  auto transport = std::make_shared<testing::FakeTransport>();
  ClientOptions client_options;
  client_options.logger = quiet();
  Client client(transport, client_options);
  SharedInformer informer(client, testing::trainingjobs_resource(),
                          "");  // never started
  Controller controller([](const std::string&) { return ReconcileResult{}; }, fast_options());
  controller.watch(informer);
  std::stop_source stop;
  auto running = std::async(std::launch::async, [&] { controller.run(stop.get_token()); });
  stop.request_stop();
  require(testing::finishes(running), "run() after stop");
  EXPECT_EQ(controller.reconciles(), 0);
}

TEST(ControllerTest, RefusesBadOptions) {
  EXPECT_THROW(Controller(Reconciler{}, fast_options()), std::invalid_argument);
  EXPECT_THROW(Controller([](const std::string&) { return ReconcileResult{}; }, fast_options(0)),
               std::invalid_argument);
}

TEST(KeyMapperTest, ControllerOwnerKeyFollowsTheControllingOwnerOfThatKind) {
  const KeyMapper to_job = controller_owner_key("TrainingJob");
  json pod = {{"metadata",
               {{"name", "gpt-a-s0-r0"},
                {"namespace", "default"},
                {"ownerReferences",
                 {{{"apiVersion", "tessel.dev/v1alpha1"},
                   {"kind", "TrainingJob"},
                   {"name", "gpt-a"},
                   {"uid", "u"},
                   {"controller", true}}}}}}};
  EXPECT_EQ(to_job(pod), (std::vector<std::string>{"default/gpt-a"}));
  pod["metadata"]["ownerReferences"][0]["controller"] = false;
  EXPECT_TRUE(to_job(pod).empty());
  pod["metadata"]["ownerReferences"][0]["controller"] = true;
  pod["metadata"]["ownerReferences"][0]["kind"] = "ReplicaSet";
  EXPECT_TRUE(to_job(pod).empty());
}

TEST(KeyMapperTest, EnqueueMappedQueuesOldAndNewKeysOnUpdate) {
  WorkQueue queue(std::make_unique<ItemExponentialFailureRateLimiter>());
  const EventHandler handler = enqueue_mapped(
      queue, [](const json& o) { return std::vector<std::string>{o["owner"].get<std::string>()}; });
  handler.on_update({{"owner", "x"}}, {{"owner", "y"}});
  handler.on_delete({{"owner", "z"}}, true);
  EXPECT_EQ(queue.size(), 3u);
}

}  // namespace
}  // namespace tessel::kube
