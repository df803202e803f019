// A controller loop in the shape of controller-runtime's: informers' handlers queue object keys
// ("namespace/name") in a rate-limited WorkQueue; N workers take keys and call a
// level-triggered Reconcile(key), which reads the current state (from the informers' caches)
// and drives the world towards it.
//
// - Result{} : done; the key's backoff is forgotten.
// - Result{.requeue = true}: again after the key's rate-limited backoff.
// - Result{.requeue_after = d}: again after d (backoff forgotten).
// - an exception: logged, again after the key's rate-limited backoff.
// The queue guarantees that no two workers hold one key at a time, and that a key changed while
// being reconciled is reconciled again afterwards.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <vector>

#include "kube/clock.h"
#include "kube/informer.h"
#include "kube/log.h"
#include "kube/object_store.h"
#include "kube/rate_limiter.h"
#include "kube/work_queue.h"

namespace tessel::kube {

struct ReconcileResult {
  bool requeue = false;
  Clock::duration requeue_after = Clock::duration::zero();
};

using Reconciler = std::function<ReconcileResult(const std::string& key)>;

struct ControllerOptions {
  std::string name = "controller";  // for logs
  int workers = 1;
  // nullptr: default_controller_rate_limiter() (5 ms doubling to 1000 s per key, 10 qps overall).
  std::unique_ptr<RateLimiter> rate_limiter;
  Clock* clock = nullptr;                // nullptr: the real clock
  std::shared_ptr<const Logger> logger;  // nullptr: component "controller" on stderr
};

// Maps a changed object to the keys to reconcile (e.g. a Pod to its owning TrainingJob).
using KeyMapper = std::function<std::vector<std::string>(const nlohmann::json& object)>;

// A handler queueing the keys `map` gives for the object (on update, for both the old and the
// new state, so that an object that stops mapping to a key still triggers it).
EventHandler enqueue_mapped(WorkQueue& queue, KeyMapper map);

// The key of the object's controller owner when that owner is of `owner_kind` (in the object's
// namespace); none otherwise.
KeyMapper controller_owner_key(std::string owner_kind);

// Whether an update is worth a reconcile (controller-runtime's predicates).
using UpdatePredicate =
    std::function<bool(const nlohmann::json& old_object, const nlohmann::json& new_object)>;

// False when an update changed nothing but status (and with it metadata.resourceVersion and
// managedFields): a controller's own status writes then do not bring its object back. A resync
// (the same object twice) passes, so the periodic revisit stays.
bool not_only_status_changed(const nlohmann::json& old_object, const nlohmann::json& new_object);

class Controller {
 public:
  // Throws std::invalid_argument for fewer than one worker or an empty reconciler.
  Controller(Reconciler reconcile, ControllerOptions options = {});
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Queues the key of every object the informer adds, updates, resyncs or deletes; run() waits
  // for the informer's first list before starting the workers.
  void watch(SharedInformer& informer);
  // Queues the key of every object the informer adds or deletes, and of updates `predicate`
  // lets through.
  void watch(SharedInformer& informer, UpdatePredicate predicate);

  // Queues the keys `map` gives for the informer's objects.
  void watch(SharedInformer& informer, KeyMapper map);

  // Blocks: waits for the watched informers to sync, runs the workers until stop is requested,
  // then shuts the queue down and waits for the reconciles in progress to return. Keys that
  // were ready at shutdown are still reconciled; held-back ones are dropped.
  void run(std::stop_token stop);

  WorkQueue& queue() { return queue_; }
  // Reconciles that returned or threw, for tests and metrics.
  int reconciles() const { return reconciles_.load(); }
  int errors() const { return errors_.load(); }

 private:
  void work();
  void process(const std::string& key);

  const Reconciler reconcile_;
  const std::string name_;
  const int workers_;
  const std::shared_ptr<const Logger> logger_;
  WorkQueue queue_;
  std::vector<SharedInformer*> informers_;
  std::atomic<int> reconciles_{0};
  std::atomic<int> errors_{0};
};

}  // namespace tessel::kube
