// The controller work queue, in the shape of client-go's rate-limiting workqueue
// (k8s.io/client-go/util/workqueue). Keys ("namespace/name") go in; workers take them with
// get() and hand them back with done().
//
// - A key is waiting at most once: adding a waiting key again does nothing.
// - A key is with at most one worker: adding a key that is being processed marks it dirty, and
//   done() queues it again, so no update is lost and no two workers hold it at once.
// - add_after() holds a key back until a delay has passed on the queue's clock; a key held back
//   twice keeps the earlier due time. When due it is added as by add().
// - add_rate_limited() is add_after() with the delay the rate limiter picks for the key.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "kube/clock.h"
#include "kube/rate_limiter.h"

namespace tessel::kube {

class WorkQueue {
 public:
  // With default_controller_rate_limiter() on clock. The clock must outlive the queue.
  explicit WorkQueue(Clock& clock = Clock::real());
  explicit WorkQueue(std::unique_ptr<RateLimiter> limiter, Clock& clock = Clock::real());
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Ignored once shutting down.
  void add(const std::string& key);
  // A delay of zero or less adds at once. Keys still held back at shutdown are dropped.
  void add_after(const std::string& key, Clock::duration delay);
  void add_rate_limited(const std::string& key);
  // The key succeeded: its backoff starts afresh. Does not remove it from the queue.
  void forget(const std::string& key);
  int num_requeues(const std::string& key) const;

  // Blocks until a key is ready, and gives it to the caller, who must call done(key) after
  // processing it. After shutdown it still hands out the keys that are ready, then nullopt.
  std::optional<std::string> get();
  void done(const std::string& key);

  // The keys ready to be handed out, counting held-back keys that are due by now.
  std::size_t size();

  // Stops accepting keys and wakes every get(): they drain the ready keys, then return nullopt.
  void shut_down();
  // As shut_down(), then waits until every key handed out is done (or shut_down() is called).
  void shut_down_with_drain();
  bool shutting_down() const;

 private:
  // Each requires mutex_.
  void add_locked(const std::string& key);
  void add_due_locked();  // moves held-back keys that are due into the queue
  void shut_down_locked(bool drain);

  const std::unique_ptr<RateLimiter> limiter_;
  Clock& clock_;

  mutable std::mutex mutex_;
  ClockCondition key_ready_;               // a key was queued, a delay may have passed, shutdown
  std::condition_variable all_done_;       // processing_ became empty, or draining stopped
  std::deque<std::string> queue_;          // ready keys, in order; each also in dirty_
  std::unordered_set<std::string> dirty_;  // keys to process: queued, or added while processing
  std::unordered_set<std::string> processing_;
  // Held-back keys by due time; the sequence number keeps keys due at once in order of adding.
  using DueAt = std::pair<Clock::time_point, std::uint64_t>;
  std::map<DueAt, std::string> held_by_due_;
  std::unordered_map<std::string, DueAt> held_;
  std::uint64_t next_sequence_ = 0;
  bool shutting_down_ = false;
  bool draining_ = false;
};

}  // namespace tessel::kube
