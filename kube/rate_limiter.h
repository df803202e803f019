// Rate limiters in the shape of client-go: the per-item limiters that decide how long a failed
// key waits before the work queue hands it out again (k8s.io/client-go/util/workqueue), and the
// token bucket that paces the REST client's requests (flowcontrol's QPS and burst).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kube/clock.h"

namespace tessel::kube {

// A token bucket holding up to burst tokens, refilled at qps tokens a second and full at
// construction. qps <= 0 means unlimited; burst is at least 1. Thread-safe.
class TokenBucket {
 public:
  TokenBucket(double qps, int burst, Clock& clock = Clock::real());

  // Takes a token now, borrowing against the refill when none is left, and returns how long
  // the caller must wait before using it (zero when one was available). Later callers wait
  // behind the borrowed tokens.
  Clock::duration reserve();
  // Blocks until a token is the caller's.
  void acquire();
  // Takes a token if one is available now, without waiting or borrowing.
  bool try_acquire();

 private:
  bool unlimited() const { return interval_ <= Clock::duration::zero(); }
  // Takes a token and returns when it may be used. Requires mutex_.
  Clock::time_point take_token(Clock::time_point now);

  Clock& clock_;
  const Clock::duration interval_;      // between two refilled tokens
  const Clock::duration burst_window_;  // interval_ * burst
  std::mutex mutex_;
  // When the bucket is full again if no more tokens are taken. The bucket holds
  // (burst_window_ - (full_at_ - now)) / interval_ tokens; borrowing pushes it past now +
  // burst_window_.
  Clock::time_point full_at_;
};

// Decides how long a key waits before it is processed again. Thread-safe.
class RateLimiter {
 public:
  virtual ~RateLimiter() = default;

  // The delay before key's next processing; each call counts as one more requeue.
  virtual Clock::duration when(const std::string& key) = 0;
  // Stops tracking key (it succeeded): its next failure starts afresh.
  virtual void forget(const std::string& key) = 0;
  // How many times key was requeued since it was last forgotten.
  virtual int num_requeues(const std::string& key) const = 0;
};

// base * 2^failures for each key, capped at max.
class ItemExponentialFailureRateLimiter final : public RateLimiter {
 public:
  explicit ItemExponentialFailureRateLimiter(Clock::duration base = std::chrono::milliseconds(5),
                                             Clock::duration max = std::chrono::seconds(1000));

  Clock::duration when(const std::string& key) override;
  void forget(const std::string& key) override;
  int num_requeues(const std::string& key) const override;

 private:
  const Clock::duration base_;
  const Clock::duration max_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, int> failures_;
};

// One token bucket shared by all keys: bounds the overall requeue rate. Keeps no per-key count.
class BucketRateLimiter final : public RateLimiter {
 public:
  explicit BucketRateLimiter(double qps = 10, int burst = 100, Clock& clock = Clock::real());

  Clock::duration when(const std::string&) override { return bucket_.reserve(); }
  void forget(const std::string&) override {}
  int num_requeues(const std::string&) const override { return 0; }

 private:
  TokenBucket bucket_;
};

// The longest delay of several limiters; every limiter counts every call.
class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters);

  Clock::duration when(const std::string& key) override;
  void forget(const std::string& key) override;
  int num_requeues(const std::string& key) const override;

 private:
  const std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

// client-go's DefaultControllerRateLimiter: the maximum of a per-key exponential backoff
// (5ms doubling up to 1000s) and an overall bucket (10 qps, burst 100).
std::unique_ptr<RateLimiter> default_controller_rate_limiter(Clock& clock = Clock::real());

}  // namespace tessel::kube
