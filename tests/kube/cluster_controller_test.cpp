// The work queue's guarantees seen through a Controller fed by an informer on a cluster: one
// reconcile per key, workers in parallel on different keys but never two on one key, updates
// made during a reconcile coalesced into one more reconcile of the latest state, and failed
// reconciles retried with a growing per-key backoff that a success resets.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/controller.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/rate_limiter.h"
#include "tests/kube/cluster_test_support.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using std::chrono::steady_clock;
using tessel::testing::test_job;
using tessel::testing::TestCluster;
using testing::InformerLog;
using testing::kClusterTimeout;
using testing::version_of;

// What the reconciler was asked to do, and how the calls overlapped. Thread-safe; tests wait
// on it.
class ReconcileLog {
 public:
  struct Call {
    steady_clock::time_point at;
    std::int64_t cached_version = -1;  // of the object in the informer's cache; -1: absent
  };

  // Marks a reconcile of key as running until the returned guard goes.
  [[nodiscard]] std::shared_ptr<void> enter(const std::string& key, std::int64_t cached_version) {
    {
      std::lock_guard lock(mutex_);
      calls_[key].push_back({steady_clock::now(), cached_version});
      const int running_key = ++running_[key];
      max_running_per_key_ = std::max(max_running_per_key_, running_key);
      max_running_ = std::max(max_running_, ++running_total_);
    }
    changed_.notify_all();
    return std::shared_ptr<void>(nullptr, [this, key](void*) {
      {
        std::lock_guard lock(mutex_);
        --running_[key];
        --running_total_;
      }
      changed_.notify_all();
    });
  }

  bool wait_for_calls(const std::string& key, std::size_t count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kClusterTimeout, [&] { return calls_[key].size() >= count; });
  }

  std::size_t count(const std::string& key) {
    std::lock_guard lock(mutex_);
    return calls_[key].size();
  }
  std::map<std::string, std::vector<Call>> calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  int max_running_per_key() {
    std::lock_guard lock(mutex_);
    return max_running_per_key_;
  }
  int max_running() {
    std::lock_guard lock(mutex_);
    return max_running_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<Call>> calls_;
  std::map<std::string, int> running_;
  int running_total_ = 0;
  int max_running_per_key_ = 0;
  int max_running_ = 0;
};

// Blocks callers until `parties` have arrived (or kClusterTimeout passes: returns false).
class Rendezvous {
 public:
  explicit Rendezvous(int parties) : parties_(parties) {}
  bool arrive_and_wait() {
    std::unique_lock lock(mutex_);
    ++arrived_;
    changed_.notify_all();
    return changed_.wait_for(lock, kClusterTimeout, [&] { return arrived_ >= parties_; });
  }

 private:
  const int parties_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
};

class ClusterControllerTest : public ::testing::Test {
 protected:
  ClusterControllerTest() : jobs_(cluster_.ensure_test_crd()), ns_(cluster_.namespace_name()) {}

  std::string key(const std::string& name) const { return ns_ + "/" + name; }

  json create(const std::string& name) { return client_->create(jobs_, ns_, test_job(ns_, name)); }

  std::int64_t cached_version(const SharedInformer& informer, const std::string& key) const {
    const ObjectSnapshot object = informer.store().get(key);
    return object ? version_of(*object) : -1;
  }

  TestCluster cluster_;
  const ResourceInfo jobs_;
  const std::string ns_;
  const std::shared_ptr<Client> client_ = cluster_.client();
  ReconcileLog log_;
};

TEST_F(ClusterControllerTest, EachKeyOnceWithWorkersInParallel) {
  constexpr int kObjects = 8;
  for (int i = 0; i < kObjects; ++i) create("j-" + std::to_string(i));
  // j-0 and j-1 wait for each other: they finish only if two workers run at once.
  Rendezvous pair(2);
  std::atomic<bool> ran_together = true;
  ControllerOptions options;
  options.workers = 4;
  Controller controller(
      [&](const std::string& key) {
        const auto running = log_.enter(key, -1);
        if (key == this->key("j-0") || key == this->key("j-1")) {
          if (!pair.arrive_and_wait()) ran_together = false;
        }
        return ReconcileResult{};
      },
      std::move(options));
  SharedInformer informer(*client_, jobs_, ns_);
  controller.watch(informer);
  informer.start();
  {
    std::jthread runner([&](std::stop_token stop) { controller.run(stop); });
    for (int i = 0; i < kObjects; ++i) {
      ASSERT_TRUE(log_.wait_for_calls(key("j-" + std::to_string(i)), 1));
    }
  }  // stops the controller: reconciles in flight finish first

  EXPECT_TRUE(ran_together);
  const auto calls = log_.calls();
  EXPECT_EQ(calls.size(), static_cast<std::size_t>(kObjects));
  for (const auto& [key, list] : calls) EXPECT_EQ(list.size(), 1u) << key;
  EXPECT_GE(log_.max_running(), 2);
  EXPECT_EQ(log_.max_running_per_key(), 1);
  EXPECT_EQ(controller.reconciles(), kObjects);
  EXPECT_EQ(controller.errors(), 0);
}

TEST_F(ClusterControllerTest, UpdatesDuringAReconcileAreCoalescedIntoOneMore) {
  create("hot");
  std::mutex gate_mutex;
  std::condition_variable gate_changed;
  bool gate_open = false;
  ControllerOptions options;
  options.workers = 4;
  SharedInformer* watched = nullptr;
  Controller controller(
      [&](const std::string& key) {
        const auto running = log_.enter(key, cached_version(*watched, key));
        if (log_.count(key) == 1) {  // the first reconcile waits for the test
          std::unique_lock lock(gate_mutex);
          gate_changed.wait_for(lock, kClusterTimeout, [&] { return gate_open; });
        }
        return ReconcileResult{};
      },
      std::move(options));
  InformerLog seen;
  SharedInformer informer(*client_, jobs_, ns_);
  watched = &informer;
  controller.watch(informer);
  // Added after the controller's handler: when this one hears of a change, the controller's
  // has already queued the key.
  informer.add_event_handler(seen.handler());
  informer.start();
  {
    std::jthread runner([&](std::stop_token stop) { controller.run(stop); });
    ASSERT_TRUE(log_.wait_for_calls(key("hot"), 1));
    json last;
    for (int replicas = 2; replicas <= 6; ++replicas) {
      last = client_->patch(jobs_, ns_, "hot", PatchType::kMerge,
                            {{"spec", {{"replicas", replicas}}}});
    }
    ASSERT_TRUE(seen.wait_for_version(key("hot"), version_of(last)));
    {
      std::lock_guard lock(gate_mutex);
      gate_open = true;
    }
    gate_changed.notify_all();
    ASSERT_TRUE(log_.wait_for_calls(key("hot"), 2));
    const auto calls = log_.calls().at(key("hot"));
    EXPECT_EQ(calls[1].cached_version, version_of(last));  // the latest state, at once
  }

  // Five updates while the first reconcile ran: exactly one more, never two at once.
  EXPECT_EQ(log_.calls().at(key("hot")).size(), 2u);
  EXPECT_EQ(log_.max_running_per_key(), 1);
}

TEST_F(ClusterControllerTest, FailuresAreRetriedWithGrowingBackoff) {
  create("flaky");
  constexpr auto kBase = std::chrono::milliseconds(20);
  constexpr int kFailures = 3;
  ControllerOptions options;
  options.rate_limiter =
      std::make_unique<ItemExponentialFailureRateLimiter>(kBase, std::chrono::seconds(1));
  Controller controller(
      [&](const std::string& key) {
        const auto running = log_.enter(key, -1);
        if (log_.count(key) <= kFailures) throw std::runtime_error("not yet");
        return ReconcileResult{};
      },
      std::move(options));
  SharedInformer informer(*client_, jobs_, ns_);
  controller.watch(informer);
  informer.start();
  {
    std::jthread runner([&](std::stop_token stop) { controller.run(stop); });
    ASSERT_TRUE(log_.wait_for_calls(key("flaky"), kFailures + 1));
    // The success forgets the key's failures, so that its next failure starts afresh.
    ASSERT_TRUE(testing::poll_until([&] { return controller.reconciles() == kFailures + 1; }));
    EXPECT_EQ(controller.queue().num_requeues(key("flaky")), 0);
  }

  const auto calls = log_.calls().at(key("flaky"));
  ASSERT_EQ(calls.size(), static_cast<std::size_t>(kFailures + 1));
  auto delay = kBase;
  for (int retry = 1; retry <= kFailures; ++retry, delay *= 2) {
    EXPECT_GE(calls[retry].at - calls[retry - 1].at, delay) << "retry " << retry;
  }
  EXPECT_EQ(controller.errors(), kFailures);
}

}  // namespace
}  // namespace tessel::kube
