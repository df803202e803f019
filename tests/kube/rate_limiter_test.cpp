#include "kube/rate_limiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kube/clock.h"
#include "waiting.h"

namespace tessel::kube {
namespace {

using testing::kFailureTimeout;
using testing::require;

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ItemExponentialFailureRateLimiterTest, DoublesPerFailureOfEachKey) {
  ItemExponentialFailureRateLimiter limiter(milliseconds(5), seconds(1000));
  EXPECT_EQ(limiter.when("ns/a"), milliseconds(5));
  EXPECT_EQ(limiter.when("ns/a"), milliseconds(10));
  EXPECT_EQ(limiter.when("ns/a"), milliseconds(20));
  EXPECT_EQ(limiter.when("ns/b"), milliseconds(5)) << "counted per key";
  EXPECT_EQ(limiter.when("ns/a"), milliseconds(40));
  EXPECT_EQ(limiter.num_requeues("ns/a"), 4);
  EXPECT_EQ(limiter.num_requeues("ns/b"), 1);
  EXPECT_EQ(limiter.num_requeues("ns/never"), 0);
}

TEST(ItemExponentialFailureRateLimiterTest, CapsAtMaxWithoutOverflow) {
  ItemExponentialFailureRateLimiter limiter(milliseconds(1), milliseconds(10));
  EXPECT_EQ(limiter.when("k"), milliseconds(1));
  EXPECT_EQ(limiter.when("k"), milliseconds(2));
  EXPECT_EQ(limiter.when("k"), milliseconds(4));
  EXPECT_EQ(limiter.when("k"), milliseconds(8));
  EXPECT_EQ(limiter.when("k"), milliseconds(10));
  for (int i = 0; i < 200; ++i) EXPECT_EQ(limiter.when("k"), milliseconds(10));
}

TEST(ItemExponentialFailureRateLimiterTest, DefaultsReachTheThousandSecondCap) {
  ItemExponentialFailureRateLimiter limiter;
  EXPECT_EQ(limiter.when("k"), milliseconds(5));
  Clock::duration last{};
  for (int i = 1; i < 40; ++i) last = limiter.when("k");
  EXPECT_EQ(last, seconds(1000));
}

TEST(ItemExponentialFailureRateLimiterTest, ForgetStartsAfresh) {
  ItemExponentialFailureRateLimiter limiter(milliseconds(5), seconds(1000));
  limiter.when("k");
  limiter.when("k");
  limiter.forget("k");
  EXPECT_EQ(limiter.num_requeues("k"), 0);
  EXPECT_EQ(limiter.when("k"), milliseconds(5));
}

TEST(BucketRateLimiterTest, BurstThenQpsSpacing) {
  FakeClock clock;
  BucketRateLimiter limiter(10, 3, clock);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.when("k" + std::to_string(i)), milliseconds(0));
  // Each further item waits one more refill interval behind the ones before it.
  EXPECT_EQ(limiter.when("a"), milliseconds(100));
  EXPECT_EQ(limiter.when("b"), milliseconds(200));
  EXPECT_EQ(limiter.when("c"), milliseconds(300));
  EXPECT_EQ(limiter.num_requeues("a"), 0);
  // A second after the last borrowed token was due the bucket is full again.
  clock.advance(milliseconds(300) + seconds(1));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.when("k"), milliseconds(0));
  EXPECT_EQ(limiter.when("k"), milliseconds(100));
}

TEST(BucketRateLimiterTest, RefillsContinuously) {
  FakeClock clock;
  BucketRateLimiter limiter(10, 1, clock);
  EXPECT_EQ(limiter.when("k"), milliseconds(0));
  clock.advance(milliseconds(40));
  EXPECT_EQ(limiter.when("k"), milliseconds(60));
}

TEST(MaxOfRateLimiterTest, TakesTheLongestDelayAndForwardsForget) {
  FakeClock clock;
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(
      std::make_unique<ItemExponentialFailureRateLimiter>(milliseconds(1), seconds(1000)));
  limiters.push_back(std::make_unique<BucketRateLimiter>(1, 2, clock));
  MaxOfRateLimiter limiter(std::move(limiters));

  EXPECT_EQ(limiter.when("k"), milliseconds(1));  // exponential; the bucket had a token
  EXPECT_EQ(limiter.when("k"), milliseconds(2));
  EXPECT_EQ(limiter.when("k"), seconds(1));  // the bucket is empty: it waits longer
  EXPECT_EQ(limiter.num_requeues("k"), 3);
  limiter.forget("k");
  EXPECT_EQ(limiter.num_requeues("k"), 0);
}

TEST(DefaultControllerRateLimiterTest, PerKeyBackoffUntilTheBurstIsSpent) {
  FakeClock clock;
  const std::unique_ptr<RateLimiter> limiter = default_controller_rate_limiter(clock);
  EXPECT_EQ(limiter->when("ns/a"), milliseconds(5));
  EXPECT_EQ(limiter->when("ns/a"), milliseconds(10));
  for (int i = 2; i < 100; ++i) {
    EXPECT_EQ(limiter->when("ns/" + std::to_string(i)), milliseconds(5));
  }
  // 100 tokens spent: the 10 qps bucket decides.
  EXPECT_EQ(limiter->when("ns/fresh"), milliseconds(100));
  EXPECT_EQ(limiter->when("ns/fresh2"), milliseconds(200));
}

TEST(TokenBucketTest, TryAcquireTakesBurstThenRefills) {
  FakeClock clock;
  TokenBucket bucket(10, 2, clock);
  EXPECT_TRUE(bucket.try_acquire());
  EXPECT_TRUE(bucket.try_acquire());
  EXPECT_FALSE(bucket.try_acquire());
  clock.advance(milliseconds(99));
  EXPECT_FALSE(bucket.try_acquire());
  clock.advance(milliseconds(1));
  EXPECT_TRUE(bucket.try_acquire());
  EXPECT_FALSE(bucket.try_acquire());
  clock.advance(seconds(10));  // refills only up to the burst
  EXPECT_TRUE(bucket.try_acquire());
  EXPECT_TRUE(bucket.try_acquire());
  EXPECT_FALSE(bucket.try_acquire());
}

TEST(TokenBucketTest, AcquireBlocksUntilATokenRefills) {
  FakeClock clock;
  TokenBucket bucket(10, 1, clock);
  bucket.acquire();  // the burst token: returns without the clock moving
  auto acquired = std::async(std::launch::async, [&] { bucket.acquire(); });
  require(clock.await_waiters(1, kFailureTimeout), "acquire waits on the clock");
  EXPECT_NE(acquired.wait_for(seconds(0)), std::future_status::ready);
  clock.advance(milliseconds(99));
  EXPECT_NE(acquired.wait_for(seconds(0)), std::future_status::ready);
  clock.advance(milliseconds(1));
  require(acquired.wait_for(kFailureTimeout) == std::future_status::ready,
          "acquire returns when its token is due");
  EXPECT_FALSE(bucket.try_acquire()) << "the refilled token went to acquire";
}

TEST(TokenBucketTest, TryAcquireWaitsBehindReservedTokens) {
  FakeClock clock;
  TokenBucket bucket(10, 1, clock);
  EXPECT_EQ(bucket.reserve(), milliseconds(0));
  EXPECT_EQ(bucket.reserve(), milliseconds(100));
  clock.advance(milliseconds(100));
  EXPECT_FALSE(bucket.try_acquire()) << "the token refilled by now was reserved";
  clock.advance(milliseconds(100));
  EXPECT_TRUE(bucket.try_acquire());
}

TEST(TokenBucketTest, NonPositiveQpsIsUnlimited) {
  FakeClock clock;
  TokenBucket bucket(0, 1, clock);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(bucket.try_acquire());
    EXPECT_EQ(bucket.reserve(), milliseconds(0));
    bucket.acquire();
  }
}

}  // namespace
}  // namespace tessel::kube
