// The reflector of client-go (k8s.io/client-go/tools/cache): keeps an ObjectStore equal to the
// server's view of one resource by listing it, then watching from the list's resourceVersion.
//
// - The list is consistent (no resourceVersion: served from etcd, as client-go's default),
//   paginated; its items replace the store's content.
// - The watch asks for bookmarks and a random timeoutSeconds in [min, 2 * min) (client-go: 5 to
//   10 minutes), so that the watches of many clients do not all end together.
// - When a watch ends or breaks, the next one resumes from the last resourceVersion seen,
//   bookmarks included. A watch that ends within a second without an event counts as a failure.
// - A 410 Gone (an HTTP answer to the watch, or an ERROR event with code 410) means that
//   version left the server's window: list again.
// - Failures (list errors, broken or refused watches, ERROR events) wait a jittered
//   exponential backoff before the next attempt; any success resets it.
// - run() returns promptly once its stop_token is triggered (a list request in flight is
//   finished first; its result is then dropped).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>

#include "kube/client.h"
#include "kube/clock.h"
#include "kube/log.h"
#include "kube/object_store.h"
#include "kube/resource.h"
#include "kube/retry.h"
#include "kube/watch_stream.h"

namespace tessel::kube {

// client-go's reflector backoff: 800 ms doubling to 30 s, jitter 1.0.
inline Backoff reflector_backoff() {
  Backoff backoff;
  backoff.initial = std::chrono::milliseconds(800);
  backoff.factor = 2.0;
  backoff.jitter = 1.0;
  backoff.steps = 1 << 30;  // a reflector never gives up
  backoff.cap = std::chrono::seconds(30);
  return backoff;
}

struct ReflectorOptions {
  // Only label_selector and field_selector are used: they restrict both list and watch.
  ListOptions selectors;
  std::int64_t page_size = 500;
  std::chrono::seconds min_watch_timeout{300};
  Backoff backoff = reflector_backoff();
  Clock* clock = nullptr;  // nullptr: the real clock; backoff waits run on it
  std::uint64_t seed = 0x5eed;
  std::shared_ptr<const Logger> logger;  // nullptr: component "reflector" on stderr
};

class Reflector {
 public:
  // The client and store must outlive the reflector. `ns` "" watches all namespaces (or a
  // cluster-scoped resource).
  Reflector(Client& client, ResourceInfo info, std::string ns, ObjectStore& store,
            ReflectorOptions options = {});
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  // Lists and watches until stop is requested. Call it once, on a thread of its own.
  void run(std::stop_token stop);

  // The first list has been stored.
  bool has_synced() const { return synced_.load(); }
  // Blocks until has_synced() or stop; returns has_synced().
  bool wait_for_sync(std::stop_token stop) const;

  // Where the next watch resumes: the last resourceVersion listed or seen.
  std::string last_resource_version() const;

  // The failures since the last success (a stored list, or a watch event): the last error
  // (ApiError, TransportError, ...) and when the first of them happened. nullopt while healthy.
  // Lets a caller tell "refused: 401 Unauthorized" from "still connecting".
  struct Failure {
    std::exception_ptr error;
    Clock::time_point since;
  };
  std::optional<Failure> failure() const;

  // Counters, for tests and metrics.
  int lists() const { return lists_.load(); }      // successful lists
  int watches() const { return watches_.load(); }  // watch requests made
  int failures() const { return failures_.load(); }

 private:
  enum class Next { kWatch, kList, kBackoffThenWatch, kBackoffThenList };

  Next list_once();
  Next watch_once(std::stop_token stop);
  // Waits the next backoff delay (at least `at_least`); false when stopped.
  bool back_off(std::stop_token stop, Clock::duration at_least = Clock::duration::zero());
  void mark_synced();
  void record_failure(std::exception_ptr error);
  void record_success();  // with mutex_ held

  Client& client_;
  const ResourceInfo info_;
  const std::string namespace_;
  ObjectStore& store_;
  const ReflectorOptions options_;
  Clock& clock_;
  const std::shared_ptr<const Logger> logger_;

  std::mt19937_64 random_;   // watch timeouts; used by run()'s thread only
  BackoffSequence backoff_;  // run()'s thread only
  std::uint64_t backoff_resets_ = 0;

  mutable std::mutex mutex_;
  mutable std::condition_variable_any synced_changed_;
  WatchPosition position_;          // guarded by mutex_
  std::optional<Failure> failure_;  // guarded by mutex_
  std::atomic<bool> synced_{false};
  std::atomic<int> lists_{0};
  std::atomic<int> watches_{0};
  std::atomic<int> failures_{0};
};

}  // namespace tessel::kube
