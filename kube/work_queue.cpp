#include "kube/work_queue.h"

#include <utility>

namespace tessel::kube {

WorkQueue::WorkQueue(Clock& clock) : WorkQueue(default_controller_rate_limiter(clock), clock) {}

WorkQueue::WorkQueue(std::unique_ptr<RateLimiter> limiter, Clock& clock)
    : limiter_(std::move(limiter)), clock_(clock), key_ready_(clock, mutex_) {}

void WorkQueue::add(const std::string& key) {
  std::lock_guard lock(mutex_);
  add_locked(key);
}

void WorkQueue::add_locked(const std::string& key) {
  if (shutting_down_ || !dirty_.insert(key).second) return;
  // A key being processed is queued again by done().
  if (processing_.contains(key)) return;
  queue_.push_back(key);
  key_ready_.notify_one();
}

void WorkQueue::add_after(const std::string& key, Clock::duration delay) {
  std::lock_guard lock(mutex_);
  if (shutting_down_) return;
  if (delay <= Clock::duration::zero()) {
    add_locked(key);
    return;
  }
  const Clock::time_point due = clock_.now() + delay;
  if (const auto it = held_.find(key); it != held_.end()) {
    if (it->second.first <= due) return;
    held_by_due_.erase(it->second);
    held_.erase(it);
  }
  const DueAt due_at{due, next_sequence_++};
  held_by_due_.emplace(due_at, key);
  held_.emplace(key, due_at);
  // A getter waiting for a later due time (or for none) must recompute its deadline.
  if (held_by_due_.begin()->first == due_at) key_ready_.notify_all();
}

void WorkQueue::add_rate_limited(const std::string& key) { add_after(key, limiter_->when(key)); }

void WorkQueue::forget(const std::string& key) { limiter_->forget(key); }

int WorkQueue::num_requeues(const std::string& key) const { return limiter_->num_requeues(key); }

void WorkQueue::add_due_locked() {
  const Clock::time_point now = clock_.now();
  while (!held_by_due_.empty() && held_by_due_.begin()->first.first <= now) {
    const auto first = held_by_due_.begin();
    held_.erase(first->second);
    add_locked(first->second);
    held_by_due_.erase(first);
  }
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(mutex_);
  for (;;) {
    add_due_locked();
    if (!queue_.empty() || shutting_down_) break;
    if (held_by_due_.empty()) {
      key_ready_.wait(lock);
    } else {
      key_ready_.wait_until(lock, held_by_due_.begin()->first.first);
    }
  }
  if (queue_.empty()) return std::nullopt;
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  dirty_.erase(key);
  processing_.insert(key);
  return key;
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard lock(mutex_);
  processing_.erase(key);
  if (dirty_.contains(key)) {
    queue_.push_back(key);
    key_ready_.notify_one();
  }
  if (processing_.empty()) all_done_.notify_all();
}

std::size_t WorkQueue::size() {
  std::lock_guard lock(mutex_);
  add_due_locked();
  return queue_.size();
}

void WorkQueue::shut_down_locked(bool drain) {
  shutting_down_ = true;
  draining_ = drain;
  held_by_due_.clear();
  held_.clear();
  key_ready_.notify_all();
  all_done_.notify_all();  // a shut_down_with_drain() still waiting stops waiting
}

void WorkQueue::shut_down() {
  std::lock_guard lock(mutex_);
  shut_down_locked(false);
}

void WorkQueue::shut_down_with_drain() {
  std::unique_lock lock(mutex_);
  shut_down_locked(true);
  all_done_.wait(lock, [&] { return processing_.empty() || !draining_; });
}

bool WorkQueue::shutting_down() const {
  std::lock_guard lock(mutex_);
  return shutting_down_;
}

}  // namespace tessel::kube
