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

// What a list key ("name" within a namespace, the storage key otherwise) is prefixed with in
// storage.
std::string key_prefix(const std::string& namespace_) {
  return namespace_.empty() ? "" : namespace_ + "/";
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
  const StoredObject found = objects->second.find(storage_key(namespace_, name));
  if (!found) return std::nullopt;
  return *found;
}

ObjectStore::WriteResult ObjectStore::create(const CollectionKey& collection, json object) {
  std::lock_guard lock(mutex_);
  const std::string namespace_ = meta_string(object, "namespace");
  const std::string name = meta_string(object, "name");
  ObjectIndex& objects = objects_[collection];
  const std::string key = storage_key(namespace_, name);
  if (const StoredObject found = objects.find(key)) return {Outcome::kAlreadyExists, *found};
  object["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  auto stored = std::make_shared<const json>(std::move(object));
  objects.put(key, stored);
  publish({StoredEvent::Type::kAdded, resource_version_, collection, namespace_, name, stored,
           nullptr});
  return {Outcome::kOk, *stored};
}

ObjectStore::WriteResult ObjectStore::update(const CollectionKey& collection, json object,
                                             const std::string& expected_version) {
  std::lock_guard lock(mutex_);
  const std::string namespace_ = meta_string(object, "namespace");
  const std::string name = meta_string(object, "name");
  ObjectIndex& objects = objects_[collection];
  const std::string key = storage_key(namespace_, name);
  StoredObject previous = objects.find(key);
  if (!previous) return {Outcome::kNotFound, nullptr};
  if (meta_string(*previous, "resourceVersion") != expected_version) {
    return {Outcome::kConflict, *previous};
  }
  object["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  auto stored = std::make_shared<const json>(std::move(object));
  objects.put(key, stored);
  publish({StoredEvent::Type::kModified, resource_version_, collection, namespace_, name, stored,
           std::move(previous)});
  return {Outcome::kOk, *stored};
}

ObjectStore::WriteResult ObjectStore::remove(const CollectionKey& collection,
                                             const std::string& namespace_, const std::string& name,
                                             const std::string& expected_version) {
  std::lock_guard lock(mutex_);
  ObjectIndex& objects = objects_[collection];
  const std::string key = storage_key(namespace_, name);
  StoredObject previous = objects.find(key);
  if (!previous) return {Outcome::kNotFound, nullptr};
  if (meta_string(*previous, "resourceVersion") != expected_version) {
    return {Outcome::kConflict, *previous};
  }
  objects.erase(key);
  json last = *previous;
  last["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  auto stored = std::make_shared<const json>(std::move(last));
  publish({StoredEvent::Type::kDeleted, resource_version_, collection, namespace_, name, stored,
           std::move(previous)});
  return {Outcome::kOk, *stored};
}

Page ObjectStore::list(const CollectionKey& collection, const std::string& namespace_,
                       const PageRequest& request) const {
  std::lock_guard lock(mutex_);
  static const ObjectIndex kNoObjects;
  const auto objects = objects_.find(collection);
  const ObjectIndex& index = objects == objects_.end() ? kNoObjects : objects->second;
  const KeyRange range = KeyRange::of_namespace(namespace_);
  Page page;
  page.resource_version = resource_version_;
  PastStates past;
  if (request.at_version && *request.at_version < resource_version_) {
    if (*request.at_version < window_start_locked()) {
      throw std::out_of_range("resourceVersion " + std::to_string(*request.at_version) +
                              " is older than the history window");
    }
    past = changes_since(collection, range, *request.at_version);
    page.resource_version = *request.at_version;
  }
  const IndexAtVersion state(index, range, past);
  const std::string prefix = key_prefix(namespace_);
  const std::optional<std::string> stopped_at =
      state.scan(prefix + request.start, [&](const std::string& key, const StoredObject& object) {
        if (request.limit && page.items.size() == request.limit) return false;
        if (!request.filter || request.filter(*object)) {
          page.items.emplace_back(key.substr(prefix.size()), object);
        }
        return true;
      });
  if (stopped_at) page.remaining = state.count_from(*stopped_at);
  return page;
}

PastStates ObjectStore::changes_since(const CollectionKey& collection, const KeyRange& range,
                                      std::int64_t version) const {
  PastStates past;
  // Newest first, so that the oldest change of a key, which knows its state then, is last.
  for (auto event = history_.rbegin();
       event != history_.rend() && event->resource_version > version; ++event) {
    if (event->collection != collection) continue;
    std::string key = storage_key(event->namespace_, event->name);
    if (key < range.first || (!range.last.empty() && key >= range.last)) continue;
    past[std::move(key)] = event->type == StoredEvent::Type::kAdded ? nullptr : event->previous;
  }
  return past;
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
    const KeyRange range = KeyRange::of_namespace(namespace_);
    const auto end = objects->second.end_of(range);
    for (auto entry = objects->second.lower_bound(range.first); entry != end; ++entry) {
      const json& object = *entry->object;
      subscription->push({StoredEvent::Type::kAdded,
                          std::stoll(meta_string(object, "resourceVersion")), collection,
                          meta_string(object, "namespace"), meta_string(object, "name"),
                          entry->object, nullptr});
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

void ObjectStore::set_change_listener(std::function<void(const StoredEvent&)> listener) {
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
  if (change_listener_) change_listener_(event);
  history_.push_back(std::move(event));
  const std::int64_t start = window_start_locked();
  while (!history_.empty() && history_.front().resource_version <= start) history_.pop_front();
  version_advanced_.notify_all();
}

std::int64_t ObjectStore::window_start_locked() const {
  return std::max(cache_start_, resource_version_ - window_);
}

}  // namespace tessel::testing
