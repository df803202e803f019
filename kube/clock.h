// An injectable monotonic clock, so that everything that waits (the work queue's delays, the
// rate limiters) can be driven by a FakeClock in tests.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace tessel::kube {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;

  virtual time_point now() const = 0;
  // Blocks the calling thread until now() >= deadline.
  virtual void sleep_until(time_point deadline) = 0;

  // The process's steady clock.
  static Clock& real();

 private:
  friend class ClockCondition;

  // Blocks on cv, whose mutex lock holds, until cv is notified or this clock reaches deadline.
  // May return spuriously.
  virtual void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          time_point deadline) = 0;
  // A clock whose time jumps (FakeClock) notifies attached condition variables when it moves.
  virtual void attach(std::mutex&, std::condition_variable&) {}
  virtual void detach(std::condition_variable&) {}
};

class RealClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
  void sleep_until(time_point deadline) override { std::this_thread::sleep_until(deadline); }

 private:
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  time_point deadline) override {
    cv.wait_until(lock, deadline);
  }
};

inline Clock& Clock::real() {
  static RealClock clock;
  return clock;
}

// A condition variable whose timed waits measure time with a Clock, so that advancing a
// FakeClock wakes them. Construct and destroy it without holding the mutex it is used with.
class ClockCondition {
 public:
  ClockCondition(Clock& clock, std::mutex& mutex) : clock_(clock) { clock_.attach(mutex, cv_); }
  ~ClockCondition() { clock_.detach(cv_); }
  ClockCondition(const ClockCondition&) = delete;
  ClockCondition& operator=(const ClockCondition&) = delete;

  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }
  // Both waits may return spuriously: re-check the condition.
  void wait(std::unique_lock<std::mutex>& lock) { cv_.wait(lock); }
  void wait_until(std::unique_lock<std::mutex>& lock, Clock::time_point deadline) {
    clock_.wait_until(lock, cv_, deadline);
  }

 private:
  Clock& clock_;
  std::condition_variable cv_;
};

// A clock that moves only when advance() is called. Thread-safe.
class FakeClock final : public Clock {
 public:
  // Starts away from the epoch so that "now minus a delay" stays a valid time.
  explicit FakeClock(time_point start = time_point{} + std::chrono::hours(24))
      : now_(start.time_since_epoch().count()) {}

  time_point now() const override { return time_point(duration(now_.load())); }

  void sleep_until(time_point deadline) override {
    std::unique_lock lock(state_mutex_);
    if (now() >= deadline) return;
    ++waiters_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return now() >= deadline; });
    --waiters_;
  }

  // Moves time forward and wakes every thread waiting on this clock.
  void advance(duration by) {
    {
      // The attached mutexes are taken under attached_mutex_, never while holding state_mutex_:
      // a waiter holds its own mutex when it takes state_mutex_.
      std::lock_guard attached_lock(attached_mutex_);
      now_.fetch_add(by.count());
      for (auto [mutex, cv] : attached_) {
        std::lock_guard lock(*mutex);
        cv->notify_all();
      }
    }
    std::lock_guard lock(state_mutex_);
    changed_.notify_all();
  }

  // Waits, in real time and at most real_timeout, until at least n threads are blocked on this
  // clock (in sleep_until, or in a ClockCondition's wait_until). Lets a test advance the clock
  // only once the thread it means to wake is waiting.
  bool await_waiters(int n, std::chrono::milliseconds real_timeout) {
    std::unique_lock lock(state_mutex_);
    return changed_.wait_for(lock, real_timeout, [&] { return waiters_ >= n; });
  }

 private:
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  time_point deadline) override {
    // advance() needs the caller's mutex to notify cv, so it cannot move the clock between this
    // check and the wait.
    if (now() >= deadline) return;
    count_waiter(+1);
    cv.wait(lock);
    count_waiter(-1);
  }

  void attach(std::mutex& mutex, std::condition_variable& cv) override {
    std::lock_guard lock(attached_mutex_);
    attached_.emplace_back(&mutex, &cv);
  }

  void detach(std::condition_variable& cv) override {
    std::lock_guard lock(attached_mutex_);
    std::erase_if(attached_, [&](const auto& entry) { return entry.second == &cv; });
  }

  void count_waiter(int delta) {
    std::lock_guard lock(state_mutex_);
    waiters_ += delta;
    changed_.notify_all();
  }

  std::atomic<duration::rep> now_;
  std::mutex attached_mutex_;
  std::vector<std::pair<std::mutex*, std::condition_variable*>> attached_;
  std::mutex state_mutex_;
  std::condition_variable changed_;  // time moved, or a waiter came or went
  int waiters_ = 0;
};

}  // namespace tessel::kube
