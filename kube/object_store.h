// The informer's cache, in the shape of client-go's thread-safe store and indexer
// (k8s.io/client-go/tools/cache): the objects of one resource kept by object_key ("ns/name",
// or "name" for cluster-scoped objects), named secondary indexes, and event handlers told of
// every change. The reflector feeds it (replace() after a list, apply() for each watch event);
// controllers read it and get keys queued through their handlers.
//
// - Stored objects are immutable: get() and list() hand out shared snapshots, so a reader
//   never sees a half-written object and may keep one as long as it likes.
// - resourceVersions are opaque strings: the store keeps whatever was delivered last and
//   never orders them.
// - Handlers run after the store has changed, outside its lock, one change at a time in the
//   order the changes were made. A handler may read the store but must not write to it.
// Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "kube/object.h"
#include "kube/work_queue.h"

namespace tessel::kube {

using ObjectSnapshot = std::shared_ptr<const nlohmann::json>;

struct EventHandler {
  std::function<void(const nlohmann::json& object)> on_add;
  std::function<void(const nlohmann::json& old_object, const nlohmann::json& new_object)> on_update;
  // last_known is the final state the server sent, or, when final_state_unknown, the last
  // state the cache saw before a relist found the object gone (a deletion missed while the
  // watch was down: client-go's DeletedFinalStateUnknown tombstone).
  std::function<void(const nlohmann::json& last_known, bool final_state_unknown)> on_delete;
};

// A handler that only queues the object's key, whatever happened: the reconciler reads the
// current state from the cache (controller-runtime's watches work this way).
EventHandler enqueue_keys(WorkQueue& queue);

// One watch event, as apply() takes it.
struct StoreEvent {
  enum class Type { kAdded, kModified, kDeleted };
  Type type = Type::kAdded;
  nlohmann::json object;
};

// What replace() changed, each list in key order.
struct ReplaceResult {
  std::vector<std::string> added;
  std::vector<std::string> updated;  // present before and after, with different content
  std::vector<std::string> deleted;  // reported to handlers as final_state_unknown
};

// Index functions give the values an object is filed under (none, one or several).
using IndexFunction = std::function<std::vector<std::string>(const nlohmann::json&)>;

// client-go's NamespaceIndex: objects filed under metadata.namespace ("" when cluster-scoped).
inline constexpr char kNamespaceIndex[] = "namespace";
std::vector<std::string> namespace_index(const nlohmann::json& object);

class ObjectStore {
 public:
  ObjectStore() = default;
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Registers an index, filing the objects already stored. Index functions run under the
  // store's lock and must not call the store. Throws std::invalid_argument when the name is
  // already taken.
  void add_index(const std::string& name, IndexFunction index);

  // Registers a handler after those already there. It is first told of every object already
  // stored, by on_add (as client-go does for a handler added to a running informer).
  void add_handler(EventHandler handler);

  // add() and update() both store the object under its key whatever was there before, and
  // tell handlers on_add or on_update depending on whether the key was already present: a
  // watch may deliver either for an object the cache did or did not have. add(), update(),
  // apply() and replace() throw std::invalid_argument for an object without metadata.name.
  void add(nlohmann::json object);
  void update(nlohmann::json object);
  // Returns whether the key was stored; handlers hear of it only then.
  bool remove(const std::string& key);

  // Added and Modified store the object as add()/update(); Deleted removes its key, and the
  // handlers get the object as delivered. Records the object's resourceVersion.
  void apply(StoreEvent event);

  // Makes the store hold exactly `objects` (a fresh list), records resource_version and
  // tells handlers what changed: on_add for new keys, on_update where the content differs,
  // on_delete(final_state_unknown) for keys the list no longer has.
  ReplaceResult replace(std::vector<nlohmann::json> objects, const std::string& resource_version);

  // Periodic resync: on_update(object, object) for every stored object, in key order.
  void resync();

  // nullptr when absent.
  ObjectSnapshot get(const std::string& key) const;
  // All in key order.
  std::vector<ObjectSnapshot> list() const;
  std::vector<ObjectSnapshot> list(const LabelSelector& selector) const;
  // Objects filed under value in the named index, in key order. Throws std::invalid_argument
  // for an index that was never added.
  std::vector<ObjectSnapshot> by_index(const std::string& index_name,
                                       const std::string& value) const;
  std::size_t size() const;
  // The resourceVersion of the last list or watch event applied ("" before any): where a
  // watch resumes.
  std::string resource_version() const;

 private:
  struct Index {
    IndexFunction function;
    std::map<std::string, std::set<std::string>> keys_by_value;
  };

  // One change as handlers hear of it; a null old_object means added, a null new_object
  // means deleted.
  struct Change {
    ObjectSnapshot old_object;
    ObjectSnapshot new_object;
    bool final_state_unknown = false;
  };

  // Each requires data_mutex_ held exclusively; they return the change made.
  Change store_locked(const std::string& key, ObjectSnapshot object);
  Change erase_locked(const std::string& key, ObjectSnapshot final_state);
  void file_locked(const std::string& key, const nlohmann::json& object);
  void unfile_locked(const std::string& key, const nlohmann::json& object);

  // Requires dispatch_mutex_, not data_mutex_.
  void notify(const std::vector<Change>& changes) const;

  // Writers hold dispatch_mutex_ from changing the data until their handlers have returned,
  // so handlers hear of changes in order; they take data_mutex_ only for the change itself,
  // so handlers can read.
  std::mutex dispatch_mutex_;
  std::vector<EventHandler> handlers_;  // guarded by dispatch_mutex_

  mutable std::shared_mutex data_mutex_;
  std::map<std::string, ObjectSnapshot> objects_;
  std::map<std::string, Index> indexes_;
  std::string resource_version_;
};

}  // namespace tessel::kube
