#include "tests/support/api_garbage_collector.h"

#include <map>
#include <set>

#include "tests/support/api_errors.h"
#include "tests/support/api_object_meta.h"
#include "tests/support/api_object_rules.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

constexpr const char* kManager = "kube-controller-manager";
constexpr const char* kForeground = "foregroundDeletion";
constexpr const char* kOrphan = "orphan";
constexpr const char* kCrdCleanup = "customresourcecleanup.apiextensions.k8s.io";
constexpr const char* kNodeTtl = "node.alpha.kubernetes.io/ttl";

// A list of one object: enough to tell whether there are any.
const PageRequest kAny{.limit = 1};

struct Item {
  std::shared_ptr<const ResourceType> type;
  StoredObject stored;

  const json& object() const { return *stored; }

  ObjectRef ref(const std::string& subresource = "") const {
    return {type, meta_string(object(), "namespace"), meta_string(object(), "name"), subresource};
  }
  std::string uid() const { return meta_string(object(), "uid"); }
};

std::vector<json> owner_references(const json& object) {
  const json refs =
      object.value("metadata", json::object()).value("ownerReferences", json::array());
  return refs.is_array() ? std::vector<json>(refs.begin(), refs.end()) : std::vector<json>{};
}

class Pass {
 public:
  Pass(ObjectStore& store, ServedResources& resources, ApiVerbs& verbs)
      : store_(store), resources_(resources), verbs_(verbs) {
    std::set<CollectionKey> seen;
    for (const auto& type : resources.all()) {
      if (!seen.insert(type->collection()).second) continue;
      for (auto& [key, object] : store.list(type->collection(), "").items) {
        by_uid_[meta_string(*object, "uid")] = items_.size();
        items_.push_back({type, object});
      }
    }
  }

  bool run() {
    for (const Item& item : items_) {
      if (is_terminating(item.object())) finish_deletion(item);
      if (!owner_references(item.object()).empty()) collect_dependent(item);
      if (item.type->group().empty() && item.type->resource() == "nodes" &&
          !annotation_of(item.object(), kNodeTtl)) {
        annotate_node_ttl(item);
      }
    }
    return changed_;
  }

 private:
  void finish_deletion(const Item& item) {
    const bool is_namespace = item.type->group().empty() && item.type->resource() == "namespaces";
    if (is_namespace) finish_namespace(item);
    if (item.type->resource() == "customresourcedefinitions" &&
        has_finalizer(item.object(), kCrdCleanup)) {
      finish_crd(item);
    }
    if (has_finalizer(item.object(), kOrphan)) {
      for (const Item* dependent : dependents_of(item.uid())) {
        remove_owner_references(*dependent, {item.uid()});
      }
      remove_finalizer(item, kOrphan);
    }
    if (has_finalizer(item.object(), kForeground)) {
      bool blocked = false;
      for (const Item* dependent : dependents_of(item.uid())) {
        const bool blocking =
            reference_to(*dependent, item.uid()).value("blockOwnerDeletion", false);
        blocked = blocked || blocking;
        if (!is_terminating(dependent->object())) {
          remove(*dependent, blocking ? "Foreground" : "Background");
        }
      }
      if (!blocked) remove_finalizer(item, kForeground);
    }
  }

  void finish_namespace(const Item& item) {
    const std::string name = meta_string(item.object(), "name");
    bool empty = true;
    for (const Item& other : items_) {
      if (!other.type->namespaced() || meta_string(other.object(), "namespace") != name) continue;
      empty = false;
      if (!is_terminating(other.object())) remove(other, "Background");
    }
    if (!empty || !namespace_empty_now(name)) return;
    const json finalizers =
        item.object().value("spec", json::object()).value("finalizers", json::array());
    if (!finalizers.empty()) {
      act([&] {
        verbs_.mutate(
            item.ref("finalize"),
            [](json& ns) {
              ns["spec"]["finalizers"] = json::array();
              return true;
            },
            kManager);
      });
    }
    remove(item, "Background");
  }

  void finish_crd(const Item& item) {
    const std::string name = meta_string(item.object(), "name");
    bool empty = true;
    for (const Item& other : items_) {
      if (!other.type->custom || other.type->crd_name != name) continue;
      empty = false;
      if (!is_terminating(other.object())) remove(other, "Background");
    }
    if (empty && item_type_empty_now(name)) remove_finalizer(item, kCrdCleanup);
  }

  // Deletes a dependent whose owners are all gone (or all waiting for their dependents), and
  // drops the references to missing owners of one that still has a live owner.
  void collect_dependent(const Item& item) {
    std::vector<std::string> gone;
    bool solid = false;
    bool waiting = false;
    for (const json& reference : owner_references(item.object())) {
      const std::string uid = reference.value("uid", "");
      const auto owner = by_uid_.find(uid);
      if (owner == by_uid_.end()) {
        const auto owner_type =
            resources_.find_kind(reference.value("apiVersion", ""), reference.value("kind", ""));
        if (!owner_type || owner_exists_now(*owner_type, item, reference)) {
          solid = true;  // not served (cannot be looked up), or created after this pass began
        } else {
          gone.push_back(uid);
        }
      } else if (is_terminating(items_[owner->second].object()) &&
                 has_finalizer(items_[owner->second].object(), kForeground)) {
        waiting = true;
        gone.push_back(uid);
      } else {
        solid = true;
      }
    }
    if (solid) {
      if (!gone.empty()) remove_owner_references(item, gone);
      return;
    }
    if (!is_terminating(item.object())) remove(item, waiting ? "Foreground" : "Background");
  }

  // kube-controller-manager's TTL controller tells kubelets how long they may cache objects;
  // below 100 nodes that is 0 seconds.
  void annotate_node_ttl(const Item& node) {
    act([&] {
      verbs_.mutate(
          node.ref(),
          [](json& object) {
            set_annotation(object, kNodeTtl, "0");
            return true;
          },
          kManager);
    });
  }

  // The pass works on a snapshot taken collection by collection; before an irreversible step
  // these look at the store as it is now.
  bool owner_exists_now(const ResourceType& owner_type, const Item& dependent,
                        const json& reference) const {
    const std::string namespace_ =
        owner_type.namespaced() ? meta_string(dependent.object(), "namespace") : "";
    const std::optional<json> owner =
        store_.get(owner_type.collection(), namespace_, reference.value("name", ""));
    return owner && meta_string(*owner, "uid") == reference.value("uid", "");
  }

  bool namespace_empty_now(const std::string& name) const {
    for (const auto& type : resources_.all()) {
      if (type->namespaced() && !store_.list(type->collection(), name, kAny).items.empty()) {
        return false;
      }
    }
    return true;
  }

  bool item_type_empty_now(const std::string& crd_name) const {
    for (const auto& type : resources_.all()) {
      if (type->custom && type->crd_name == crd_name &&
          !store_.list(type->collection(), "", kAny).items.empty()) {
        return false;
      }
    }
    return true;
  }

  std::vector<const Item*> dependents_of(const std::string& uid) const {
    std::vector<const Item*> dependents;
    for (const Item& item : items_) {
      if (!reference_to(item, uid).is_null()) dependents.push_back(&item);
    }
    return dependents;
  }

  static json reference_to(const Item& item, const std::string& uid) {
    for (const json& reference : owner_references(item.object())) {
      if (reference.value("uid", "") == uid) return reference;
    }
    return nullptr;
  }

  void remove(const Item& item, const std::string& propagation) {
    DeleteOptions options;
    options.propagation_policy = propagation;
    options.precondition_uid = item.uid();
    act([&] { verbs_.remove(item.ref(), options); });
  }

  void remove_finalizer(const Item& item, const std::string& finalizer) {
    act([&] {
      verbs_.mutate(
          item.ref(), [&](json& object) { return testing::remove_finalizer(object, finalizer); },
          kManager);
    });
  }

  void remove_owner_references(const Item& item, const std::vector<std::string>& uids) {
    act([&] {
      verbs_.mutate(
          item.ref(),
          [&](json& object) {
            json kept = json::array();
            for (const json& reference : owner_references(object)) {
              const std::string uid = reference.value("uid", "");
              if (std::find(uids.begin(), uids.end(), uid) == uids.end()) {
                kept.push_back(reference);
              }
            }
            if (kept.size() == owner_references(object).size()) return false;
            if (kept.empty()) {
              object["metadata"].erase("ownerReferences");
            } else {
              object["metadata"]["ownerReferences"] = kept;
            }
            return true;
          },
          kManager);
    });
  }

  // Runs a write; a 404 or a conflict means someone else got there first and the next pass
  // looks again.
  template <typename Action>
  void act(Action action) {
    try {
      action();
      changed_ = true;
    } catch (const ApiError& error) {
      if (error.http_status() != 404 && error.http_status() != 409) changed_ = true;
    }
  }

  ObjectStore& store_;
  ServedResources& resources_;
  ApiVerbs& verbs_;
  std::vector<Item> items_;
  std::map<std::string, std::size_t> by_uid_;
  bool changed_ = false;
};

bool being_deleted_or_owned(const StoredObject& object) {
  return object && (is_terminating(*object) || !owner_references(*object).empty());
}

}  // namespace

bool GarbageCollector::may_give_work(const StoredEvent& change) {
  if (change.type == StoredEvent::Type::kDeleted) return true;
  if (being_deleted_or_owned(change.object) || being_deleted_or_owned(change.previous)) return true;
  if (change.collection == CollectionKey{"apiextensions.k8s.io", "customresourcedefinitions"}) {
    return true;
  }
  return change.collection == CollectionKey{"", "nodes"} &&
         !annotation_of(*change.object, kNodeTtl);
}

GarbageCollector::GarbageCollector(ObjectStore& store, ServedResources& resources, ApiVerbs& verbs)
    : store_(store), resources_(resources), verbs_(verbs), pass_([this] { run_once(); }) {}

void GarbageCollector::observe(const StoredEvent& change) {
  if (may_give_work(change)) pass_.request();
}

bool GarbageCollector::run_once() { return Pass(store_, resources_, verbs_).run(); }

}  // namespace tessel::testing
