#include "kube/object_store.h"

#include <stdexcept>
#include <utility>

namespace tessel::kube {

using nlohmann::json;

namespace {

std::string key_of(const json& object) {
  std::string key = object_key(object);
  if (object_name(object).empty()) {
    throw std::invalid_argument("object without metadata.name: " + object.dump());
  }
  return key;
}

}  // namespace

EventHandler enqueue_keys(WorkQueue& queue) {
  return EventHandler{
      .on_add = [&queue](const json& object) { queue.add(object_key(object)); },
      .on_update = [&queue](const json&, const json& object) { queue.add(object_key(object)); },
      .on_delete = [&queue](const json& object, bool) { queue.add(object_key(object)); },
  };
}

std::vector<std::string> namespace_index(const json& object) { return {object_namespace(object)}; }

void ObjectStore::add_index(const std::string& name, IndexFunction index) {
  std::unique_lock lock(data_mutex_);
  if (indexes_.contains(name)) throw std::invalid_argument("index already added: " + name);
  Index& added = indexes_[name];
  added.function = std::move(index);
  for (const auto& [key, object] : objects_) {
    for (auto& value : added.function(*object)) added.keys_by_value[value].insert(key);
  }
}

void ObjectStore::add_handler(EventHandler handler) {
  std::lock_guard dispatch(dispatch_mutex_);
  if (handler.on_add) {
    for (const auto& object : list()) handler.on_add(*object);
  }
  handlers_.push_back(std::move(handler));
}

void ObjectStore::add(json object) {
  const std::string key = key_of(object);
  auto snapshot = std::make_shared<const json>(std::move(object));
  std::lock_guard dispatch(dispatch_mutex_);
  Change change;
  {
    std::unique_lock lock(data_mutex_);
    change = store_locked(key, std::move(snapshot));
  }
  notify({change});
}

void ObjectStore::update(json object) { add(std::move(object)); }

bool ObjectStore::remove(const std::string& key) {
  std::lock_guard dispatch(dispatch_mutex_);
  Change change;
  {
    std::unique_lock lock(data_mutex_);
    change = erase_locked(key, nullptr);
  }
  if (!change.old_object) return false;
  notify({change});
  return true;
}

void ObjectStore::apply(StoreEvent event) {
  const std::string key = key_of(event.object);
  const std::string resource_version = object_resource_version(event.object);
  auto snapshot = std::make_shared<const json>(std::move(event.object));
  std::lock_guard dispatch(dispatch_mutex_);
  Change change;
  {
    std::unique_lock lock(data_mutex_);
    change = event.type == StoreEvent::Type::kDeleted ? erase_locked(key, std::move(snapshot))
                                                      : store_locked(key, std::move(snapshot));
    if (!resource_version.empty()) resource_version_ = resource_version;
  }
  if (change.old_object || change.new_object) notify({change});
}

ReplaceResult ObjectStore::replace(std::vector<json> objects, const std::string& resource_version) {
  std::map<std::string, ObjectSnapshot> listed;
  for (auto& object : objects) {
    std::string key = key_of(object);
    listed.insert_or_assign(std::move(key), std::make_shared<const json>(std::move(object)));
  }

  std::lock_guard dispatch(dispatch_mutex_);
  ReplaceResult result;
  std::vector<Change> added, updated, deleted;
  {
    std::unique_lock lock(data_mutex_);
    std::vector<std::string> gone;
    for (const auto& [key, object] : objects_) {
      if (!listed.contains(key)) gone.push_back(key);
    }
    for (const auto& key : gone) {
      Change change = erase_locked(key, nullptr);
      change.final_state_unknown = true;
      deleted.push_back(std::move(change));
      result.deleted.push_back(key);
    }
    for (auto& [key, object] : listed) {
      const auto stored = objects_.find(key);
      if (stored == objects_.end()) {
        added.push_back(store_locked(key, std::move(object)));
        result.added.push_back(key);
      } else if (*stored->second != *object) {
        updated.push_back(store_locked(key, std::move(object)));
        result.updated.push_back(key);
      }
    }
    resource_version_ = resource_version;
  }
  notify(added);
  notify(updated);
  notify(deleted);
  return result;
}

void ObjectStore::resync() {
  std::lock_guard dispatch(dispatch_mutex_);
  std::vector<Change> changes;
  for (auto& object : list()) changes.push_back(Change{object, object});
  notify(changes);
}

ObjectSnapshot ObjectStore::get(const std::string& key) const {
  std::shared_lock lock(data_mutex_);
  const auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectSnapshot> ObjectStore::list() const {
  std::shared_lock lock(data_mutex_);
  std::vector<ObjectSnapshot> result;
  result.reserve(objects_.size());
  for (const auto& [key, object] : objects_) result.push_back(object);
  return result;
}

std::vector<ObjectSnapshot> ObjectStore::list(const LabelSelector& selector) const {
  std::shared_lock lock(data_mutex_);
  std::vector<ObjectSnapshot> result;
  for (const auto& [key, object] : objects_) {
    if (selector.matches(*object)) result.push_back(object);
  }
  return result;
}

std::vector<ObjectSnapshot> ObjectStore::by_index(const std::string& index_name,
                                                  const std::string& value) const {
  std::shared_lock lock(data_mutex_);
  const auto index = indexes_.find(index_name);
  if (index == indexes_.end()) throw std::invalid_argument("no such index: " + index_name);
  std::vector<ObjectSnapshot> result;
  const auto keys = index->second.keys_by_value.find(value);
  if (keys == index->second.keys_by_value.end()) return result;
  for (const auto& key : keys->second) result.push_back(objects_.at(key));
  return result;
}

std::size_t ObjectStore::size() const {
  std::shared_lock lock(data_mutex_);
  return objects_.size();
}

std::string ObjectStore::resource_version() const {
  std::shared_lock lock(data_mutex_);
  return resource_version_;
}

ObjectStore::Change ObjectStore::store_locked(const std::string& key, ObjectSnapshot object) {
  const auto it = objects_.find(key);
  Change change{it == objects_.end() ? nullptr : it->second, object};
  if (change.old_object) unfile_locked(key, *change.old_object);
  file_locked(key, *object);
  objects_.insert_or_assign(key, std::move(object));
  return change;
}

ObjectStore::Change ObjectStore::erase_locked(const std::string& key, ObjectSnapshot final_state) {
  const auto it = objects_.find(key);
  if (it == objects_.end()) return {};
  unfile_locked(key, *it->second);
  Change change{it->second, nullptr};
  // on_delete gets the server's final state where there is one.
  if (final_state) change.old_object = std::move(final_state);
  objects_.erase(it);
  return change;
}

void ObjectStore::file_locked(const std::string& key, const json& object) {
  for (auto& [name, index] : indexes_) {
    for (auto& value : index.function(object)) index.keys_by_value[value].insert(key);
  }
}

void ObjectStore::unfile_locked(const std::string& key, const json& object) {
  for (auto& [name, index] : indexes_) {
    for (const auto& value : index.function(object)) {
      const auto keys = index.keys_by_value.find(value);
      if (keys == index.keys_by_value.end()) continue;
      keys->second.erase(key);
      if (keys->second.empty()) index.keys_by_value.erase(keys);
    }
  }
}

void ObjectStore::notify(const std::vector<Change>& changes) const {
  for (const Change& change : changes) {
    for (const EventHandler& handler : handlers_) {
      if (!change.old_object) {
        if (handler.on_add) handler.on_add(*change.new_object);
      } else if (!change.new_object) {
        if (handler.on_delete) handler.on_delete(*change.old_object, change.final_state_unknown);
      } else if (handler.on_update) {
        handler.on_update(*change.old_object, *change.new_object);
      }
    }
  }
}

}  // namespace tessel::kube
