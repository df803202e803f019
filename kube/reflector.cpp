#include "kube/reflector.h"

#include <exception>
#include <optional>
#include <utility>

#include "kube/stoppable_sleep.h"

namespace tessel::kube {

using nlohmann::json;

namespace {

// A watch that ends this soon without delivering anything is treated as a failure, so a
// server that closes every watch at once is not hammered (client-go does the same).
constexpr auto kShortestHealthyWatch = std::chrono::seconds(1);

std::optional<StoreEvent::Type> store_event_type(WatchEvent::Type type) {
  switch (type) {
    case WatchEvent::Added:
      return StoreEvent::Type::kAdded;
    case WatchEvent::Modified:
      return StoreEvent::Type::kModified;
    case WatchEvent::Deleted:
      return StoreEvent::Type::kDeleted;
    case WatchEvent::Bookmark:
    case WatchEvent::Error:
      break;
  }
  return std::nullopt;
}

}  // namespace

Reflector::Reflector(Client& client, ResourceInfo info, std::string ns, ObjectStore& store,
                     ReflectorOptions options)
    : client_(client),
      info_(std::move(info)),
      namespace_(std::move(ns)),
      store_(store),
      options_(std::move(options)),
      clock_(options_.clock ? *options_.clock : Clock::real()),
      logger_(options_.logger ? options_.logger : std::make_shared<const Logger>("reflector")),
      random_(options_.seed),
      backoff_(options_.backoff, options_.seed) {
  if (options_.min_watch_timeout.count() <= 0) {
    throw std::invalid_argument("reflector " + info_.gvr.resource +
                                ": min_watch_timeout must be positive");
  }
}

std::string Reflector::last_resource_version() const {
  std::lock_guard lock(mutex_);
  return position_.resource_version();
}

bool Reflector::wait_for_sync(std::stop_token stop) const {
  std::unique_lock lock(mutex_);
  synced_changed_.wait(lock, stop, [&] { return synced_.load(); });
  return synced_.load();
}

std::optional<Reflector::Failure> Reflector::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void Reflector::record_failure(std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  if (failure_) {
    failure_->error = std::move(error);
  } else {
    failure_ = Failure{std::move(error), clock_.now()};
  }
}

void Reflector::record_success() { failure_.reset(); }

void Reflector::mark_synced() {
  {
    std::lock_guard lock(mutex_);
    synced_.store(true);
  }
  synced_changed_.notify_all();
}

bool Reflector::back_off(std::stop_token stop, Clock::duration at_least) {
  ++failures_;
  const Clock::duration delay =
      std::max(at_least, std::chrono::duration_cast<Clock::duration>(backoff_.next()));
  logger_->debug(
      "backing off",
      {{"resource", info_.gvr.resource},
       {"delay_ms", std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()}});
  return sleep_unless_stopped(clock_, delay, stop);
}

void Reflector::run(std::stop_token stop) {
  Next next = Next::kList;
  while (!stop.stop_requested()) {
    switch (next) {
      case Next::kBackoffThenList:
        if (!back_off(stop)) return;
        [[fallthrough]];
      case Next::kList:
        next = list_once();
        break;
      case Next::kBackoffThenWatch:
        if (!back_off(stop)) return;
        [[fallthrough]];
      case Next::kWatch:
        next = watch_once(stop);
        break;
    }
  }
}

Reflector::Next Reflector::list_once() {
  ListOptions options;
  options.label_selector = options_.selectors.label_selector;
  options.field_selector = options_.selectors.field_selector;
  options.limit = options_.page_size;
  try {
    ListResult result = client_.list_all(info_, namespace_, options);
    store_.replace(std::move(result.items), result.resource_version);
    {
      std::lock_guard lock(mutex_);
      position_.reset(result.resource_version);
      record_success();
    }
    ++lists_;
    backoff_ = BackoffSequence(options_.backoff, options_.seed + ++backoff_resets_);
    mark_synced();
    logger_->debug("listed", {{"resource", info_.gvr.resource},
                              {"namespace", namespace_},
                              {"resourceVersion", result.resource_version}});
    return Next::kWatch;
  } catch (const std::exception& error) {
    record_failure(std::current_exception());
    logger_->warning(
        "list failed",
        {{"resource", info_.gvr.resource}, {"namespace", namespace_}, {"error", error.what()}});
    return Next::kBackoffThenList;
  }
}

Reflector::Next Reflector::watch_once(std::stop_token stop) {
  ListOptions options;
  {
    std::lock_guard lock(mutex_);
    options = position_.resume_options(options_.selectors);
  }
  const auto min_timeout = options_.min_watch_timeout.count();
  options.timeout_seconds =
      min_timeout + static_cast<std::int64_t>(random_() % static_cast<std::uint64_t>(min_timeout));

  std::optional<ApiError> error_event;
  auto on_event = [&](const WatchEvent& event) {
    if (const auto type = store_event_type(event.type)) {
      store_.apply(StoreEvent{*type, event.object});
    }
    std::lock_guard lock(mutex_);
    error_event = position_.observe(event);
    if (!error_event) record_success();
    return !error_event.has_value();  // after an ERROR the server ends the stream anyway
  };

  ++watches_;
  const Clock::time_point started = clock_.now();
  try {
    const WatchResult result = client_.watch(info_, namespace_, options, on_event, stop);
    if (stop.stop_requested()) return Next::kWatch;
    if (error_event) {
      if (error_event->is_gone()) {
        logger_->info("watch expired, listing again", {{"resource", info_.gvr.resource},
                                                       {"namespace", namespace_},
                                                       {"reason", error_event->what()}});
        return Next::kList;
      }
      record_failure(std::make_exception_ptr(*error_event));
      logger_->warning("watch error event", {{"resource", info_.gvr.resource},
                                             {"namespace", namespace_},
                                             {"error", error_event->what()}});
      return Next::kBackoffThenWatch;
    }
    if (result.end == WatchResult::End::kDecodeError) {
      logger_->warning("watch body could not be decoded",
                       {{"resource", info_.gvr.resource}, {"error", result.detail}});
      return Next::kBackoffThenWatch;
    }
    if (result.events == 0 && clock_.now() - started < kShortestHealthyWatch) {
      logger_->warning("watch closed at once", {{"resource", info_.gvr.resource}});
      return Next::kBackoffThenWatch;
    }
    if (result.events > 0) {
      backoff_ = BackoffSequence(options_.backoff, options_.seed + ++backoff_resets_);
    }
    return Next::kWatch;
  } catch (const ApiError& error) {
    bool gone = false;
    {
      std::lock_guard lock(mutex_);
      position_.observe_error(error);
      gone = position_.needs_relist();
    }
    if (gone) {
      logger_->info("watch refused as expired, listing again",
                    {{"resource", info_.gvr.resource}, {"error", error.what()}});
      return Next::kList;
    }
    record_failure(std::current_exception());
    logger_->warning("watch refused", {{"resource", info_.gvr.resource}, {"error", error.what()}});
    if (error.retry_after_seconds()) {
      back_off(stop, std::chrono::seconds(*error.retry_after_seconds()));
      return Next::kWatch;  // run() checks stop first
    }
    return Next::kBackoffThenWatch;
  } catch (const std::exception& error) {
    // A refused or broken connection: resume from the last version seen once it is back.
    record_failure(std::current_exception());
    logger_->warning("watch failed", {{"resource", info_.gvr.resource}, {"error", error.what()}});
    return Next::kBackoffThenWatch;
  }
}

}  // namespace tessel::kube
