#include "tests/support/api_store.h"

#include <algorithm>
#include <stdexcept>

namespace tessel::testing {
namespace {

using nlohmann::json;

// A watch whose reader falls this far behind is closed (as kube-apiserver terminates a
// blocked watcher); its client re-watches or relists.
constexpr std::size_t kMaxQueuedEvents = 10000;

std::string meta_string(const json& object, const char* field) {
  const json& metadata = object.value("metadata", json::object());
  const auto found = metadata.find(field);
  return found != metadata.end() && found->is_string() ? found->get<std::string>() : "";
}

// The key of an object inside a list of one namespace (or of a cluster-scoped resource):
// its name; across namespaces: "namespace/name".
std::string list_key(const std::string& stored_key, const std::string& namespace_) {
  return namespace_.empty() ? stored_key : stored_key.substr(namespace_.size() + 1);
}

bool in_namespace(const std::string& stored_key, const std::string& namespace_) {
  return namespace_.empty() || stored_key.rfind(namespace_ + "/", 0) == 0;
}

}  // namespace

std::string storage_key(const std::string& namespace_, const std::string& name) {
  return namespace_.empty() ? name : namespace_ + "/" + name;
}

std::vector<StoredEvent> WatchSubscription::take(std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, until, [&] { return !queue_.empty() || end_ != End::kNone; });
  std::vector<StoredEvent> events(std::make_move_iterator(queue_.begin()),
                                  std::make_move_iterator(queue_.end()));
  queue_.clear();
  return events;
}

void WatchSubscription::end(End how) {
  {
    std::lock_guard lock(mutex_);
    if (end_ == End::kNone) end_ = how;
  }
  changed_.notify_all();
}

WatchSubscription::End WatchSubscription::ended() const {
  std::lock_guard lock(mutex_);
  return end_;
}

bool WatchSubscription::push(const StoredEvent& event) {
  {
    std::lock_guard lock(mutex_);
    if (end_ != End::kNone) return false;
    if (queue_.size() >= kMaxQueuedEvents) {
      end_ = End::kClosed;
      queue_.clear();
    } else {
      queue_.push_back(event);
    }
  }
  changed_.notify_all();
  return true;
}

ObjectStore::ObjectStore(std::int64_t window) : window_(std::max<std::int64_t>(window, 1)) {}

std::optional<json> ObjectStore::get(const CollectionKey& collection, const std::string& namespace_,
                                     const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto objects = objects_.find(collection);
  if (objects == objects_.end()) return std::nullopt;
  const auto found = objects->second.find(storage_key(namespace_, name));
  if (found == objects->second.end()) return std::nullopt;
  return found->second;
}

ObjectStore::WriteResult ObjectStore::create(const CollectionKey& collection, json object) {
  std::lock_guard lock(mutex_);
  const std::string namespace_ = meta_string(object, "namespace");
  const std::string name = meta_string(object, "name");
  Objects& objects = objects_[collection];
  const std::string key = storage_key(namespace_, name);
  if (const auto found = objects.find(key); found != objects.end()) {
    return {Outcome::kAlreadyExists, found->second};
  }
  object["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  objects[key] = object;
  publish({StoredEvent::Type::kAdded, resource_version_, collection, namespace_, name, object,
           nullptr});
  return {Outcome::kOk, object};
}

ObjectStore::WriteResult ObjectStore::update(const CollectionKey& collection, json object,
                                             const std::string& expected_version) {
  std::lock_guard lock(mutex_);
  const std::string namespace_ = meta_string(object, "namespace");
  const std::string name = meta_string(object, "name");
  Objects& objects = objects_[collection];
  const auto found = objects.find(storage_key(namespace_, name));
  if (found == objects.end()) return {Outcome::kNotFound, nullptr};
  if (meta_string(found->second, "resourceVersion") != expected_version) {
    return {Outcome::kConflict, found->second};
  }
  object["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  json previous = std::exchange(found->second, object);
  publish({StoredEvent::Type::kModified, resource_version_, collection, namespace_, name, object,
           std::move(previous)});
  return {Outcome::kOk, object};
}

ObjectStore::WriteResult ObjectStore::remove(const CollectionKey& collection,
                                             const std::string& namespace_, const std::string& name,
                                             const std::string& expected_version) {
  std::lock_guard lock(mutex_);
  Objects& objects = objects_[collection];
  const auto found = objects.find(storage_key(namespace_, name));
  if (found == objects.end()) return {Outcome::kNotFound, nullptr};
  if (meta_string(found->second, "resourceVersion") != expected_version) {
    return {Outcome::kConflict, found->second};
  }
  json previous = std::move(found->second);
  objects.erase(found);
  json last = previous;
  last["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  publish({StoredEvent::Type::kDeleted, resource_version_, collection, namespace_, name, last,
           std::move(previous)});
  return {Outcome::kOk, last};
}

ObjectStore::Snapshot ObjectStore::list(const CollectionKey& collection,
                                        const std::string& namespace_,
                                        std::optional<std::int64_t> at_version) const {
  std::lock_guard lock(mutex_);
  Objects state;
  if (const auto objects = objects_.find(collection); objects != objects_.end()) {
    for (const auto& [key, object] : objects->second) {
      if (in_namespace(key, namespace_)) state.emplace(key, object);
    }
  }
  Snapshot snapshot;
  snapshot.resource_version = resource_version_;
  if (at_version && *at_version < resource_version_) {
    if (*at_version < window_start_locked()) {
      throw std::out_of_range("resourceVersion " + std::to_string(*at_version) +
                              " is older than the history window");
    }
    // Undo the changes made after at_version, newest first.
    for (auto event = history_.rbegin();
         event != history_.rend() && event->resource_version > *at_version; ++event) {
      if (event->collection != collection ||
          (!namespace_.empty() && event->namespace_ != namespace_)) {
        continue;
      }
      const std::string key = storage_key(event->namespace_, event->name);
      if (event->type == StoredEvent::Type::kAdded) {
        state.erase(key);
      } else {
        state[key] = event->previous;
      }
    }
    snapshot.resource_version = *at_version;
  }
  for (auto& [key, object] : state) {
    snapshot.items.emplace_back(list_key(key, namespace_), std::move(object));
  }
  std::sort(snapshot.items.begin(), snapshot.items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return snapshot;
}

std::shared_ptr<WatchSubscription> ObjectStore::watch(const CollectionKey& collection,
                                                      const std::string& namespace_,
                                                      std::optional<std::int64_t> after_version,
                                                      std::int64_t* window_start) {
  std::lock_guard lock(mutex_);
  if (window_start) *window_start = window_start_locked();
  auto subscription = std::make_shared<WatchSubscription>();
  if (after_version) {
    if (*after_version < window_start_locked()) return nullptr;
    for (const StoredEvent& event : history_) {
      if (event.resource_version > *after_version && event.collection == collection &&
          (namespace_.empty() || event.namespace_ == namespace_)) {
        subscription->push(event);
      }
    }
  } else if (const auto objects = objects_.find(collection); objects != objects_.end()) {
    for (const auto& [key, object] : objects->second) {
      if (!in_namespace(key, namespace_)) continue;
      subscription->push({StoredEvent::Type::kAdded,
                          std::stoll(meta_string(object, "resourceVersion")), collection,
                          meta_string(object, "namespace"), meta_string(object, "name"), object,
                          nullptr});
    }
  }
  watchers_.push_back({collection, namespace_, subscription});
  return subscription;
}

std::int64_t ObjectStore::current_resource_version() const {
  std::lock_guard lock(mutex_);
  return resource_version_;
}

std::int64_t ObjectStore::window_start() const {
  std::lock_guard lock(mutex_);
  return window_start_locked();
}

std::int64_t ObjectStore::latest_version_of(const CollectionKey& collection) const {
  std::lock_guard lock(mutex_);
  const auto found = latest_.find(collection);
  return found == latest_.end() ? cache_start_ : std::max(found->second, cache_start_);
}

bool ObjectStore::wait_for_version(std::int64_t version, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return version_advanced_.wait_for(lock, timeout, [&] { return resource_version_ >= version; });
}

void ObjectStore::end_watches(WatchSubscription::End how) {
  std::lock_guard lock(mutex_);
  for (const Watcher& watcher : watchers_) {
    if (auto subscription = watcher.subscription.lock()) subscription->end(how);
  }
  watchers_.clear();
}

void ObjectStore::restart_watch_cache() {
  end_watches(WatchSubscription::End::kDropped);
  std::lock_guard lock(mutex_);
  cache_start_ = resource_version_;
  history_.clear();
}

void ObjectStore::set_change_listener(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  change_listener_ = std::move(listener);
}

void ObjectStore::publish(StoredEvent event) {
  latest_[event.collection] = event.resource_version;
  std::erase_if(watchers_, [&](const Watcher& watcher) {
    auto subscription = watcher.subscription.lock();
    if (!subscription) return true;
    if (watcher.collection != event.collection ||
        (!watcher.namespace_.empty() && watcher.namespace_ != event.namespace_)) {
      return false;
    }
    return !subscription->push(event);
  });
  history_.push_back(std::move(event));
  const std::int64_t start = window_start_locked();
  while (!history_.empty() && history_.front().resource_version <= start) history_.pop_front();
  version_advanced_.notify_all();
  if (change_listener_) change_listener_();
}

std::int64_t ObjectStore::window_start_locked() const {
  return std::max(cache_start_, resource_version_ - window_);
}

}  // namespace tessel::testing
