#include "kube/controller.h"

#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>

#include "kube/object.h"

namespace tessel::kube {

using nlohmann::json;

namespace {

Clock& clock_of(const ControllerOptions& options) {
  return options.clock ? *options.clock : Clock::real();
}

std::unique_ptr<RateLimiter> limiter_of(ControllerOptions& options) {
  return options.rate_limiter ? std::move(options.rate_limiter)
                              : default_controller_rate_limiter(clock_of(options));
}

}  // namespace

EventHandler enqueue_mapped(WorkQueue& queue, KeyMapper map) {
  auto shared = std::make_shared<KeyMapper>(std::move(map));
  auto enqueue = [&queue, shared](const json& object) {
    for (const std::string& key : (*shared)(object)) queue.add(key);
  };
  return EventHandler{
      .on_add = enqueue,
      .on_update =
          [enqueue](const json& old_object, const json& new_object) {
            enqueue(old_object);
            enqueue(new_object);
          },
      .on_delete = [enqueue](const json& object, bool) { enqueue(object); },
  };
}

KeyMapper controller_owner_key(std::string owner_kind) {
  return [owner_kind = std::move(owner_kind)](const json& object) -> std::vector<std::string> {
    const std::optional<json> owner = controller_owner(object);
    if (!owner || owner->value("kind", "") != owner_kind) return {};
    const std::string name = owner->value("name", "");
    if (name.empty()) return {};
    const std::string ns = object_namespace(object);
    return {ns.empty() ? name : ns + "/" + name};
  };
}

Controller::Controller(Reconciler reconcile, ControllerOptions options)
    : reconcile_(std::move(reconcile)),
      name_(options.name),
      workers_(options.workers),
      logger_(options.logger ? options.logger
                             : std::make_shared<const Logger>(
                                   Logger("controller").with({{"controller", name_}}))),
      queue_(limiter_of(options), clock_of(options)) {
  if (!reconcile_) throw std::invalid_argument("controller " + name_ + ": no reconciler");
  if (workers_ < 1) {
    throw std::invalid_argument("controller " + name_ + ": workers must be at least 1, not " +
                                std::to_string(workers_));
  }
}

Controller::~Controller() { queue_.shut_down(); }

void Controller::watch(SharedInformer& informer) {
  informer.add_event_handler(enqueue_keys(queue_));
  informers_.push_back(&informer);
}

bool not_only_status_changed(const json& old_object, const json& new_object) {
  if (old_object == new_object) return true;  // a resync
  const auto without_status = [](json object) {
    object.erase("status");
    if (object.contains("metadata") && object["metadata"].is_object()) {
      object["metadata"].erase("resourceVersion");
      object["metadata"].erase("managedFields");
    }
    return object;
  };
  return without_status(old_object) != without_status(new_object);
}

void Controller::watch(SharedInformer& informer, UpdatePredicate predicate) {
  EventHandler handler = enqueue_keys(queue_);
  handler.on_update = [enqueue = handler.on_update, predicate = std::move(predicate)](
                          const json& old_object, const json& new_object) {
    if (predicate(old_object, new_object)) enqueue(old_object, new_object);
  };
  informer.add_event_handler(std::move(handler));
  informers_.push_back(&informer);
}

void Controller::watch(SharedInformer& informer, KeyMapper map) {
  informer.add_event_handler(enqueue_mapped(queue_, std::move(map)));
  informers_.push_back(&informer);
}

void Controller::run(std::stop_token stop) {
  for (SharedInformer* informer : informers_) {
    if (!informer->wait_for_sync(stop)) break;
  }
  if (!stop.stop_requested()) {
    logger_->info("starting workers", {{"workers", workers_}});
    std::vector<std::jthread> workers;
    for (int i = 0; i < workers_; ++i) workers.emplace_back([this] { work(); });
    std::stop_callback shut_down(stop, [this] { queue_.shut_down(); });
    for (std::jthread& worker : workers) worker.join();
  }
  queue_.shut_down();
  logger_->info("stopped");
}

void Controller::work() {
  while (const std::optional<std::string> key = queue_.get()) {
    process(*key);
    queue_.done(*key);
  }
}

void Controller::process(const std::string& key) {
  // The counters move after the queue has been told, so that a test seeing them sees the queue.
  try {
    const ReconcileResult result = reconcile_(key);
    if (result.requeue_after > Clock::duration::zero()) {
      queue_.forget(key);
      queue_.add_after(key, result.requeue_after);
    } else if (result.requeue) {
      queue_.add_rate_limited(key);
    } else {
      queue_.forget(key);
    }
  } catch (const std::exception& error) {
    logger_->error("reconcile failed",
                   {{"key", key}, {"requeues", queue_.num_requeues(key)}, {"error", error.what()}});
    queue_.add_rate_limited(key);
    ++errors_;
  } catch (...) {
    logger_->error("reconcile failed", {{"key", key}, {"error", "non-standard exception"}});
    queue_.add_rate_limited(key);
    ++errors_;
  }
  ++reconciles_;
}

}  // namespace tessel::kube
