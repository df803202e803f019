// The object storage of the Kubernetes API test server: every object of every resource in
// memory, one global resourceVersion counter (as etcd's revision), the history of recent
// changes for watches and consistent paginated lists, and the fan-out of changes to open
// watches. Thread-safe: each method is atomic. It knows nothing of kinds or semantics; the
// verbs decide what to write and the store only enforces optimistic concurrency.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/api_object_index.h"

namespace tessel::testing {

// Which objects: one resource (group + plural; all versions share storage), one namespace
// or all ("").
struct CollectionKey {
  std::string group;
  std::string resource;
  friend auto operator<=>(const CollectionKey&, const CollectionKey&) = default;
};

struct StoredEvent {
  enum class Type { kAdded, kModified, kDeleted };
  Type type = Type::kAdded;
  std::int64_t resource_version = 0;
  CollectionKey collection;
  std::string namespace_;
  std::string name;
  // ADDED, MODIFIED: the new state. DELETED: the last stored state, carrying the deletion's
  // resourceVersion (as a watch reports it). Shared with the store, the history and every
  // watch.
  StoredObject object;
  StoredObject previous;  // the state before the change; nullptr for ADDED
};

// An open watch's queue. The store appends under its lock without ever blocking; the watch's
// own thread takes the events out.
class WatchSubscription {
 public:
  enum class End { kNone, kClosed, kDropped };

  // Waits until an event is queued, the subscription ends, or `until` passes; returns the
  // queued events (possibly none).
  std::vector<StoredEvent> take(std::chrono::steady_clock::time_point until);
  // kClosed: the stream ends cleanly; kDropped: the connection is cut.
  void end(End how);
  End ended() const;

 private:
  friend class ObjectStore;
  // Returns false when the queue overflowed and the subscription was closed.
  bool push(const StoredEvent& event);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<StoredEvent> queue_;
  End end_ = End::kNone;
};

// What a list of the store reads: a page of one collection as it is now or as it was at
// `at_version`.
struct PageRequest {
  std::optional<std::int64_t> at_version{};  // nullopt: now
  std::string start{};                       // the first key to look at (as in Page::items)
  std::size_t limit = 0;                     // at most this many objects; 0: all
  std::function<bool(const nlohmann::json&)> filter{};  // which objects it takes; empty: all
};

struct Page {
  std::int64_t resource_version = 0;
  // In storage-key order, keyed "name" within a namespace or for cluster-scoped resources,
  // "namespace/name" across namespaces.
  std::vector<std::pair<std::string, StoredObject>> items;
  // When the limit cut the page short: the objects after it, taken by the filter or not.
  std::size_t remaining = 0;
};

class ObjectStore {
 public:
  // A watch or an exact list older than `window` resourceVersions is expired (410).
  explicit ObjectStore(std::int64_t window);

  enum class Outcome { kOk, kNotFound, kAlreadyExists, kConflict };
  struct WriteResult {
    Outcome outcome = Outcome::kOk;
    nlohmann::json object;  // the stored state (kOk), or the current state (kConflict)
  };

  std::optional<nlohmann::json> get(const CollectionKey& collection, const std::string& namespace_,
                                    const std::string& name) const;
  // Stores a new object, assigning metadata.resourceVersion.
  WriteResult create(const CollectionKey& collection, nlohmann::json object);
  // Replaces the object when its stored resourceVersion is `expected_version`.
  WriteResult update(const CollectionKey& collection, nlohmann::json object,
                     const std::string& expected_version);
  // Removes the object when its stored resourceVersion is `expected_version`; returns the
  // last state with the deletion's resourceVersion.
  WriteResult remove(const CollectionKey& collection, const std::string& namespace_,
                     const std::string& name, const std::string& expected_version);

  // Costs the objects it looks at, plus the changes since `at_version`. Throws
  // std::out_of_range when at_version is older than the history window.
  Page list(const CollectionKey& collection, const std::string& namespace_,
            const PageRequest& request = {}) const;

  // Opens a watch on the collection for events after `after_version`, or (nullopt) starting
  // with a synthetic ADDED for every object now there. Returns nullptr when after_version is
  // older than the window (then *window_start says where the window starts).
  std::shared_ptr<WatchSubscription> watch(const CollectionKey& collection,
                                           const std::string& namespace_,
                                           std::optional<std::int64_t> after_version,
                                           std::int64_t* window_start);

  std::int64_t current_resource_version() const;
  // The oldest resourceVersion a watch or an exact list may start from.
  std::int64_t window_start() const;
  // The resourceVersion of the collection's latest change (bookmarks carry it).
  std::int64_t latest_version_of(const CollectionKey& collection) const;
  // Blocks until the current resourceVersion reaches `version` or the timeout passes.
  bool wait_for_version(std::int64_t version, std::chrono::milliseconds timeout) const;

  // Ends every open watch (dropped: the connection is cut).
  void end_watches(WatchSubscription::End how);
  // As after an apiserver restart: every resourceVersion before now is too old to watch from.
  void restart_watch_cache();
  // Called (under the store's lock, so it must only look at the change and signal) after
  // every change.
  void set_change_listener(std::function<void(const StoredEvent&)> listener);

 private:
  struct Watcher {
    CollectionKey collection;
    std::string namespace_;
    std::weak_ptr<WatchSubscription> subscription;
  };
  void publish(StoredEvent event);  // records and fans out; lock held
  std::int64_t window_start_locked() const;
  // The past states of the keys of `range` changed after `version`; lock held.
  PastStates changes_since(const CollectionKey& collection, const KeyRange& range,
                           std::int64_t version) const;

  const std::int64_t window_;
  mutable std::mutex mutex_;
  mutable std::condition_variable version_advanced_;
  std::int64_t resource_version_ = 0;
  std::int64_t cache_start_ = 0;
  std::map<CollectionKey, ObjectIndex> objects_;
  std::map<CollectionKey, std::int64_t> latest_;
  std::deque<StoredEvent> history_;
  std::vector<Watcher> watchers_;
  std::function<void(const StoredEvent&)> change_listener_;
};

// The storage key of an object: "namespace/name", or "name" when cluster-scoped.
std::string storage_key(const std::string& namespace_, const std::string& name);

}  // namespace tessel::testing
