#include "kube/rate_limiter.h"

#include <algorithm>
#include <utility>

namespace tessel::kube {

namespace {

Clock::duration interval_for(double qps) {
  if (qps <= 0) return Clock::duration::zero();
  return std::chrono::round<Clock::duration>(std::chrono::duration<double>(1.0 / qps));
}

}  // namespace

TokenBucket::TokenBucket(double qps, int burst, Clock& clock)
    : clock_(clock),
      interval_(interval_for(qps)),
      burst_window_(interval_ * std::max(burst, 1)),
      full_at_(clock.now()) {}

Clock::time_point TokenBucket::take_token(Clock::time_point now) {
  full_at_ = std::max(full_at_, now) + interval_;
  return std::max(now, full_at_ - burst_window_);
}

Clock::duration TokenBucket::reserve() {
  if (unlimited()) return Clock::duration::zero();
  std::lock_guard lock(mutex_);
  const Clock::time_point now = clock_.now();
  return take_token(now) - now;
}

void TokenBucket::acquire() {
  if (unlimited()) return;
  Clock::time_point usable_at;
  {
    std::lock_guard lock(mutex_);
    usable_at = take_token(clock_.now());
  }
  clock_.sleep_until(usable_at);
}

bool TokenBucket::try_acquire() {
  if (unlimited()) return true;
  std::lock_guard lock(mutex_);
  const Clock::time_point now = clock_.now();
  const Clock::time_point full_at = std::max(full_at_, now) + interval_;
  if (full_at - now > burst_window_) return false;
  full_at_ = full_at;
  return true;
}

ItemExponentialFailureRateLimiter::ItemExponentialFailureRateLimiter(Clock::duration base,
                                                                     Clock::duration max)
    : base_(base), max_(max) {}

Clock::duration ItemExponentialFailureRateLimiter::when(const std::string& key) {
  int exponent;
  {
    std::lock_guard lock(mutex_);
    exponent = failures_[key]++;
  }
  // base << exponent, with the cap checked before the shift can overflow.
  if (exponent >= 63 || base_.count() > (max_.count() >> exponent)) return max_;
  return Clock::duration(base_.count() << exponent);
}

void ItemExponentialFailureRateLimiter::forget(const std::string& key) {
  std::lock_guard lock(mutex_);
  failures_.erase(key);
}

int ItemExponentialFailureRateLimiter::num_requeues(const std::string& key) const {
  std::lock_guard lock(mutex_);
  const auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

BucketRateLimiter::BucketRateLimiter(double qps, int burst, Clock& clock)
    : bucket_(qps, burst, clock) {}

MaxOfRateLimiter::MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
    : limiters_(std::move(limiters)) {}

Clock::duration MaxOfRateLimiter::when(const std::string& key) {
  Clock::duration longest = Clock::duration::zero();
  for (const auto& limiter : limiters_) longest = std::max(longest, limiter->when(key));
  return longest;
}

void MaxOfRateLimiter::forget(const std::string& key) {
  for (const auto& limiter : limiters_) limiter->forget(key);
}

int MaxOfRateLimiter::num_requeues(const std::string& key) const {
  int most = 0;
  for (const auto& limiter : limiters_) most = std::max(most, limiter->num_requeues(key));
  return most;
}

std::unique_ptr<RateLimiter> default_controller_rate_limiter(Clock& clock) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(std::make_unique<ItemExponentialFailureRateLimiter>(
      std::chrono::milliseconds(5), std::chrono::seconds(1000)));
  limiters.push_back(std::make_unique<BucketRateLimiter>(10, 100, clock));
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

}  // namespace tessel::kube
