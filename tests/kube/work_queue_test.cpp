#include "kube/work_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kube/clock.h"
#include "kube/rate_limiter.h"
#include "waiting.h"

namespace tessel::kube {
namespace {

using testing::eventually;
using testing::finishes;
using testing::kFailureTimeout;
using testing::require;

using std::chrono::milliseconds;

std::unique_ptr<RateLimiter> exponential(milliseconds base) {
  return std::make_unique<ItemExponentialFailureRateLimiter>(base, std::chrono::seconds(1000));
}

TEST(WorkQueueTest, HandsOutKeysInOrderAndDeduplicatesWaitingKeys) {
  WorkQueue queue;
  queue.add("ns/a");
  queue.add("ns/b");
  queue.add("ns/a");
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue.get(), "ns/a");
  EXPECT_EQ(queue.get(), "ns/b");
  EXPECT_EQ(queue.size(), 0u);
}

TEST(WorkQueueTest, KeyAddedWhileProcessingIsQueuedAgainOnDone) {
  WorkQueue queue;
  queue.add("ns/a");
  ASSERT_EQ(queue.get(), "ns/a");
  queue.add("ns/a");
  queue.add("ns/a");
  EXPECT_EQ(queue.size(), 0u) << "handed out while a worker holds it";
  queue.done("ns/a");
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.get(), "ns/a");
  queue.done("ns/a");
  EXPECT_EQ(queue.size(), 0u);
}

TEST(WorkQueueTest, DoneWithoutNewAddDoesNotQueueAgain) {
  WorkQueue queue;
  queue.add("ns/a");
  ASSERT_EQ(queue.get(), "ns/a");
  queue.done("ns/a");
  EXPECT_EQ(queue.size(), 0u);
}

// 4 workers, 1000 adds over 50 keys. Every add first bumps the key's version; a worker records
// the version it saw when it took the key. No key may be held by two workers at once, and each
// key must be processed after its last add (having seen its last version).
TEST(WorkQueueTest, NoKeyIsHeldByTwoWorkersAndNoAddIsLost) {
  constexpr int kWorkers = 4;
  constexpr int kAdds = 1000;
  constexpr int kKeys = 50;
  WorkQueue queue;
  std::array<std::atomic<int>, kKeys> holders{};
  std::array<std::atomic<int>, kKeys> added_version{};
  std::array<std::atomic<int>, kKeys> processed_version{};
  std::atomic<int> overlaps = 0;

  std::vector<std::future<void>> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.push_back(std::async(std::launch::async, [&] {
      while (const std::optional<std::string> key = queue.get()) {
        const int index = std::stoi(*key);
        if (holders[index].fetch_add(1) != 0) ++overlaps;
        const int seen = added_version[index].load();
        std::this_thread::yield();  // widen the window in which a second holder would show
        processed_version[index].store(std::max(processed_version[index].load(), seen));
        holders[index].fetch_sub(1);
        queue.done(*key);
      }
    }));
  }

  std::mt19937 random(42);
  std::uniform_int_distribution<int> pick(0, kKeys - 1);
  for (int i = 1; i <= kAdds; ++i) {
    const int index = pick(random);
    added_version[index].store(i);
    queue.add(std::to_string(index));
  }
  // Wait until no worker holds a key; workers still drain whatever is queued.
  auto drained = std::async(std::launch::async, [&] { queue.shut_down_with_drain(); });
  require(finishes(drained), "shut_down_with_drain");
  for (auto& worker : workers) require(finishes(worker), "worker");

  EXPECT_EQ(overlaps.load(), 0);
  for (int index = 0; index < kKeys; ++index) {
    EXPECT_EQ(processed_version[index].load(), added_version[index].load()) << "key " << index;
  }
}

TEST(WorkQueueTest, ShutDownUnblocksGet) {
  WorkQueue queue;
  auto got = std::async(std::launch::async, [&] { return queue.get(); });
  queue.shut_down();
  require(finishes(got), "get");
  EXPECT_EQ(got.get(), std::nullopt);
  EXPECT_TRUE(queue.shutting_down());
}

TEST(WorkQueueTest, AfterShutDownGetDrainsReadyKeysAndAddIsIgnored) {
  WorkQueue queue;
  queue.add("ns/a");
  queue.add("ns/b");
  queue.shut_down();
  queue.add("ns/c");
  EXPECT_EQ(queue.get(), "ns/a");
  EXPECT_EQ(queue.get(), "ns/b");
  EXPECT_EQ(queue.get(), std::nullopt);
}

TEST(WorkQueueTest, KeyDirtiedBeforeShutDownIsStillHandedOut) {
  WorkQueue queue;
  queue.add("ns/a");
  ASSERT_EQ(queue.get(), "ns/a");
  queue.add("ns/a");
  queue.shut_down();
  queue.done("ns/a");
  EXPECT_EQ(queue.get(), "ns/a");
  EXPECT_EQ(queue.get(), std::nullopt);
}

TEST(WorkQueueTest, ShutDownWithDrainWaitsForDone) {
  WorkQueue queue;
  queue.add("ns/a");
  ASSERT_EQ(queue.get(), "ns/a");
  auto drained = std::async(std::launch::async, [&] { queue.shut_down_with_drain(); });
  // Once shutting down is visible the drain is under way; it cannot end while "ns/a" is held.
  require(eventually([&] { return queue.shutting_down(); }), "shutting down");
  EXPECT_NE(drained.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  queue.done("ns/a");
  require(finishes(drained), "shut_down_with_drain");
}

TEST(WorkQueueTest, ShutDownEndsAWaitingDrain) {
  WorkQueue queue;
  queue.add("ns/a");
  ASSERT_EQ(queue.get(), "ns/a");
  auto drained = std::async(std::launch::async, [&] { queue.shut_down_with_drain(); });
  require(eventually([&] { return queue.shutting_down(); }), "shutting down");
  queue.shut_down();
  require(finishes(drained), "shut_down_with_drain");
}

TEST(WorkQueueTest, AddAfterJoinsTheQueueWhenDue) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add_after("ns/a", milliseconds(10));
  EXPECT_EQ(queue.size(), 0u);
  clock.advance(milliseconds(9));
  EXPECT_EQ(queue.size(), 0u);
  clock.advance(milliseconds(1));
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.get(), "ns/a");
}

TEST(WorkQueueTest, AddAfterHandsOutInDueOrder) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add_after("ns/a", milliseconds(30));
  queue.add_after("ns/b", milliseconds(10));
  queue.add_after("ns/c", milliseconds(20));
  queue.add_after("ns/d", milliseconds(20));
  clock.advance(milliseconds(30));
  EXPECT_EQ(queue.get(), "ns/b");
  EXPECT_EQ(queue.get(), "ns/c");
  EXPECT_EQ(queue.get(), "ns/d");
  EXPECT_EQ(queue.get(), "ns/a");
}

TEST(WorkQueueTest, AddAfterTwiceKeepsTheEarlierDueTime) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add_after("ns/a", milliseconds(50));
  queue.add_after("ns/a", milliseconds(10));
  queue.add_after("ns/a", milliseconds(30));
  clock.advance(milliseconds(10));
  ASSERT_EQ(queue.size(), 1u);
  ASSERT_EQ(queue.get(), "ns/a");
  queue.done("ns/a");
  clock.advance(milliseconds(100));
  EXPECT_EQ(queue.size(), 0u) << "held back once, handed out once";
}

TEST(WorkQueueTest, DueKeyIsDeduplicatedAgainstTheReadyOne) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add_after("ns/a", milliseconds(10));
  queue.add("ns/a");
  clock.advance(milliseconds(10));
  EXPECT_EQ(queue.size(), 1u);
}

TEST(WorkQueueTest, AddAfterWithoutDelayAddsAtOnce) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add_after("ns/a", milliseconds(0));
  queue.add_after("ns/b", milliseconds(-5));
  EXPECT_EQ(queue.size(), 2u);
}

TEST(WorkQueueTest, ShutDownDropsHeldBackKeys) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add_after("ns/a", milliseconds(10));
  queue.shut_down();
  clock.advance(milliseconds(10));
  EXPECT_EQ(queue.get(), std::nullopt);
}

TEST(WorkQueueTest, BlockedGetWakesWhenTheClockReachesTheDueTime) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add_after("ns/late", std::chrono::hours(1));
  auto got = std::async(std::launch::async, [&] { return queue.get(); });
  require(clock.await_waiters(1, kFailureTimeout), "get waits on the clock");
  // An earlier key makes the waiting get() wait for it instead.
  queue.add_after("ns/soon", milliseconds(10));
  clock.advance(milliseconds(10));
  require(finishes(got), "get");
  EXPECT_EQ(got.get(), "ns/soon");
  EXPECT_EQ(queue.size(), 0u);
}

TEST(WorkQueueTest, AddRateLimitedBacksOffPerKeyUntilForgotten) {
  FakeClock clock;
  WorkQueue queue(exponential(milliseconds(5)), clock);
  queue.add_rate_limited("ns/a");
  EXPECT_EQ(queue.num_requeues("ns/a"), 1);
  clock.advance(milliseconds(4));
  EXPECT_EQ(queue.size(), 0u);
  clock.advance(milliseconds(1));
  ASSERT_EQ(queue.get(), "ns/a");
  queue.done("ns/a");

  queue.add_rate_limited("ns/a");
  EXPECT_EQ(queue.num_requeues("ns/a"), 2);
  clock.advance(milliseconds(9));
  EXPECT_EQ(queue.size(), 0u);
  clock.advance(milliseconds(1));
  EXPECT_EQ(queue.size(), 1u);

  queue.forget("ns/a");
  EXPECT_EQ(queue.num_requeues("ns/a"), 0);
  EXPECT_EQ(queue.size(), 1u) << "forget does not take the key out of the queue";
}

TEST(WorkQueueTest, DefaultQueueUsesTheControllerRateLimiter) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add_rate_limited("ns/a");
  clock.advance(milliseconds(4));
  EXPECT_EQ(queue.size(), 0u);
  clock.advance(milliseconds(1));
  EXPECT_EQ(queue.size(), 1u);
}

}  // namespace
}  // namespace tessel::kube
