#include "kube/object_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kube/object.h"
#include "kube/work_queue.h"

namespace tessel::kube {
namespace {

using nlohmann::json;

json pod(const std::string& ns, const std::string& name, const std::string& resource_version,
         const std::string& node = "", const json& labels = json::object()) {
  json object = {{"apiVersion", "v1"},
                 {"kind", "Pod"},
                 {"metadata",
                  {{"namespace", ns},
                   {"name", name},
                   {"resourceVersion", resource_version},
                   {"labels", labels}}},
                 {"spec", json::object()}};
  if (!node.empty()) object["spec"]["nodeName"] = node;
  return object;
}

std::vector<std::string> node_name_index(const json& object) {
  const auto node = object.value(json::json_pointer("/spec/nodeName"), "");
  if (node.empty()) return {};
  return {node};
}

std::vector<std::string> keys(const std::vector<ObjectSnapshot>& objects) {
  std::vector<std::string> result;
  for (const auto& object : objects) result.push_back(object_key(*object));
  return result;
}

// Records every handler call as one line, e.g. "add ns/a 1", "update ns/a 1->2".
struct Recorder {
  std::vector<std::string> calls;

  EventHandler handler() {
    return EventHandler{
        .on_add = [this](const json& o) { record("add", o, object_resource_version(o)); },
        .on_update =
            [this](const json& old_object, const json& new_object) {
              record(
                  "update", new_object,
                  object_resource_version(old_object) + "->" + object_resource_version(new_object));
            },
        .on_delete =
            [this](const json& o, bool final_state_unknown) {
              record(final_state_unknown ? "tombstone" : "delete", o, object_resource_version(o));
            },
    };
  }

  void record(const std::string& what, const json& object, const std::string& detail) {
    calls.push_back(what + " " + object_key(object) + " " + detail);
  }
};

TEST(ObjectStoreTest, StoresGetsAndRemovesObjectsByKey) {
  ObjectStore store;
  store.add(pod("ns", "a", "1"));
  store.add(json{{"kind", "Node"}, {"metadata", {{"name", "n1"}}}});
  EXPECT_EQ(store.size(), 2u);
  ASSERT_NE(store.get("ns/a"), nullptr);
  EXPECT_EQ(object_resource_version(*store.get("ns/a")), "1");
  ASSERT_NE(store.get("n1"), nullptr);
  EXPECT_EQ(store.get("ns/missing"), nullptr);

  store.update(pod("ns", "a", "2"));
  EXPECT_EQ(object_resource_version(*store.get("ns/a")), "2");
  EXPECT_EQ(keys(store.list()), (std::vector<std::string>{"n1", "ns/a"}));

  EXPECT_TRUE(store.remove("ns/a"));
  EXPECT_FALSE(store.remove("ns/a"));
  EXPECT_EQ(store.get("ns/a"), nullptr);
  EXPECT_EQ(store.size(), 1u);
}

TEST(ObjectStoreTest, SnapshotsStayUnchangedAfterLaterWrites) {
  ObjectStore store;
  store.add(pod("ns", "a", "1"));
  const ObjectSnapshot before = store.get("ns/a");
  store.update(pod("ns", "a", "2"));
  store.remove("ns/a");
  EXPECT_EQ(object_resource_version(*before), "1");
}

TEST(ObjectStoreTest, RefusesObjectsWithoutAName) {
  ObjectStore store;
  EXPECT_THROW(store.add(json{{"metadata", {{"namespace", "ns"}}}}), std::invalid_argument);
  EXPECT_EQ(store.size(), 0u);
}

TEST(ObjectStoreTest, IndexesFollowUpdatesAndRemovals) {
  ObjectStore store;
  store.add(pod("ns1", "early", "1", "node-a"));
  store.add_index(kNamespaceIndex, namespace_index);
  store.add_index("node", node_name_index);
  EXPECT_THROW(store.add_index("node", node_name_index), std::invalid_argument);

  store.add(pod("ns1", "b", "2", "node-a"));
  store.add(pod("ns2", "c", "3"));
  EXPECT_EQ(keys(store.by_index("node", "node-a")),
            (std::vector<std::string>{"ns1/b", "ns1/early"}));
  EXPECT_EQ(keys(store.by_index(kNamespaceIndex, "ns2")), (std::vector<std::string>{"ns2/c"}));

  store.update(pod("ns1", "b", "4", "node-b"));  // rescheduled
  store.update(pod("ns2", "c", "5", "node-b"));  // bound
  EXPECT_EQ(keys(store.by_index("node", "node-a")), (std::vector<std::string>{"ns1/early"}));
  EXPECT_EQ(keys(store.by_index("node", "node-b")), (std::vector<std::string>{"ns1/b", "ns2/c"}));

  store.remove("ns1/b");
  EXPECT_EQ(keys(store.by_index("node", "node-b")), (std::vector<std::string>{"ns2/c"}));
  EXPECT_EQ(keys(store.by_index(kNamespaceIndex, "ns1")), (std::vector<std::string>{"ns1/early"}));
  EXPECT_TRUE(store.by_index("node", "node-z").empty());
  EXPECT_THROW(store.by_index("unknown", "x"), std::invalid_argument);
}

TEST(ObjectStoreTest, ListsByLabelSelector) {
  ObjectStore store;
  store.add(pod("ns", "a", "1", "", {{"app", "web"}, {"tier", "front"}}));
  store.add(pod("ns", "b", "2", "", {{"app", "web"}}));
  store.add(pod("ns", "c", "3", "", {{"app", "db"}}));
  EXPECT_EQ(keys(store.list(LabelSelector::parse("app=web"))),
            (std::vector<std::string>{"ns/a", "ns/b"}));
  EXPECT_EQ(keys(store.list(LabelSelector::parse("app in (web,db),!tier"))),
            (std::vector<std::string>{"ns/b", "ns/c"}));
  EXPECT_EQ(store.list(LabelSelector()).size(), 3u);
}

TEST(ObjectStoreTest, ApplyFollowsWatchEventsAndRecordsTheResourceVersion) {
  ObjectStore store;
  Recorder recorder;
  store.add_handler(recorder.handler());
  EXPECT_EQ(store.resource_version(), "");

  store.apply({StoreEvent::Type::kAdded, pod("ns", "a", "10")});
  store.apply({StoreEvent::Type::kModified, pod("ns", "a", "11")});
  store.apply({StoreEvent::Type::kModified, pod("ns", "b", "12")});  // unseen: an add
  store.apply({StoreEvent::Type::kDeleted, pod("ns", "a", "13")});
  store.apply({StoreEvent::Type::kDeleted, pod("ns", "gone", "14")});  // unknown: no handler

  EXPECT_EQ(recorder.calls, (std::vector<std::string>{"add ns/a 10", "update ns/a 10->11",
                                                      "add ns/b 12", "delete ns/a 13"}));
  EXPECT_EQ(store.resource_version(), "14");
  EXPECT_EQ(keys(store.list()), (std::vector<std::string>{"ns/b"}));
}

TEST(ObjectStoreTest, KeepsTheNewestDeliveredObjectWithoutOrderingResourceVersions) {
  ObjectStore store;
  store.apply({StoreEvent::Type::kAdded, pod("ns", "a", "10")});
  // Smaller as a number, but resourceVersions are opaque: the last delivered wins.
  store.apply({StoreEvent::Type::kModified, pod("ns", "a", "9")});
  EXPECT_EQ(object_resource_version(*store.get("ns/a")), "9");
  EXPECT_EQ(store.resource_version(), "9");
}

TEST(ObjectStoreTest, ReplaceReportsAddedUpdatedAndMissedDeletions) {
  ObjectStore store;
  store.add_index("node", node_name_index);
  store.replace({pod("ns", "kept", "1", "node-a"), pod("ns", "changed", "2", "node-a"),
                 pod("ns", "deleted-while-away", "3", "node-a")},
                "3");
  Recorder recorder;
  store.add_handler(recorder.handler());
  recorder.calls.clear();

  const ReplaceResult result =
      store.replace({pod("ns", "kept", "1", "node-a"), pod("ns", "changed", "7", "node-b"),
                     pod("ns", "new", "8", "node-a")},
                    "9");

  EXPECT_EQ(result.added, (std::vector<std::string>{"ns/new"}));
  EXPECT_EQ(result.updated, (std::vector<std::string>{"ns/changed"}));
  EXPECT_EQ(result.deleted, (std::vector<std::string>{"ns/deleted-while-away"}));
  EXPECT_EQ(recorder.calls, (std::vector<std::string>{"add ns/new 8", "update ns/changed 2->7",
                                                      "tombstone ns/deleted-while-away 3"}));
  EXPECT_EQ(store.resource_version(), "9");
  EXPECT_EQ(keys(store.list()), (std::vector<std::string>{"ns/changed", "ns/kept", "ns/new"}));
  EXPECT_EQ(keys(store.by_index("node", "node-a")),
            (std::vector<std::string>{"ns/kept", "ns/new"}));
}

TEST(ObjectStoreTest, HandlersRunInOrderAfterTheChangeAndMayReadTheStore) {
  ObjectStore store;
  std::vector<std::string> calls;
  std::optional<std::string> seen_on_add;
  bool gone_on_delete = false;
  store.add_handler(EventHandler{
      .on_add =
          [&](const json& object) {
            calls.push_back("first add");
            seen_on_add = object_resource_version(*store.get(object_key(object)));
            EXPECT_EQ(store.list().size(), store.size());
          },
      .on_update = nullptr,
      .on_delete =
          [&](const json& object, bool) {
            calls.push_back("first delete");
            gone_on_delete = store.get(object_key(object)) == nullptr;
          },
  });
  store.add_handler(EventHandler{
      .on_add = [&](const json&) { calls.push_back("second add"); },
      .on_update = [&](const json&, const json&) { calls.push_back("second update"); },
      .on_delete = nullptr,
  });

  store.add(pod("ns", "a", "1"));
  store.update(pod("ns", "a", "2"));
  store.remove("ns/a");

  EXPECT_EQ(calls,
            (std::vector<std::string>{"first add", "second add", "second update", "first delete"}));
  EXPECT_EQ(seen_on_add, "1");
  EXPECT_TRUE(gone_on_delete);
}

TEST(ObjectStoreTest, LateHandlerHearsOfStoredObjectsAsAdds) {
  ObjectStore store;
  store.add(pod("ns", "a", "1"));
  store.add(pod("ns", "b", "2"));
  Recorder recorder;
  store.add_handler(recorder.handler());
  EXPECT_EQ(recorder.calls, (std::vector<std::string>{"add ns/a 1", "add ns/b 2"}));
}

TEST(ObjectStoreTest, ResyncReportsEveryObjectAsUpdatedToItself) {
  ObjectStore store;
  store.add(pod("ns", "a", "1"));
  store.add(pod("ns", "b", "2"));
  Recorder recorder;
  store.add_handler(recorder.handler());
  recorder.calls.clear();
  store.resync();
  EXPECT_EQ(recorder.calls, (std::vector<std::string>{"update ns/a 1->1", "update ns/b 2->2"}));
}

TEST(ObjectStoreTest, EnqueueKeysQueuesEachKeyOnce) {
  ObjectStore store;
  WorkQueue queue;
  store.add_handler(enqueue_keys(queue));
  store.add(pod("ns", "a", "1"));
  store.update(pod("ns", "a", "2"));
  store.add(pod("ns", "b", "3"));
  store.remove("ns/a");
  store.add(json{{"metadata", {{"name", "cluster-scoped"}}}});

  EXPECT_EQ(queue.size(), 3u);
  EXPECT_EQ(queue.get(), "ns/a");
  EXPECT_EQ(queue.get(), "ns/b");
  EXPECT_EQ(queue.get(), "cluster-scoped");
}

TEST(ObjectStoreTest, ConcurrentWritersAndReadersLeaveAConsistentStore) {
  constexpr int kThreads = 4;
  constexpr int kOperations = 500;
  constexpr int kKeysPerWriter = 20;
  ObjectStore store;
  store.add_index("node", node_name_index);
  std::atomic<int> adds = 0;
  std::atomic<int> deletes = 0;
  store.add_handler(EventHandler{
      .on_add = [&](const json&) { ++adds; },
      .on_update = nullptr,
      .on_delete = [&](const json&, bool) { ++deletes; },
  });

  std::atomic<bool> writing = true;
  std::vector<std::thread> readers;
  for (int r = 0; r < kThreads; ++r) {
    readers.emplace_back([&] {
      while (writing) {
        for (const auto& object : store.by_index("node", "node-1")) {
          // A snapshot is always whole: its index value still holds.
          EXPECT_EQ((*object)["spec"]["nodeName"], "node-1");
        }
        for (const auto& object : store.list()) EXPECT_FALSE(object_name(*object).empty());
        store.get("w0/p0");
      }
    });
  }
  std::vector<std::thread> writers;
  for (int w = 0; w < kThreads; ++w) {
    writers.emplace_back([&, w] {
      const std::string ns = "w" + std::to_string(w);
      for (int i = 0; i < kOperations; ++i) {
        const std::string name = "p" + std::to_string(i % kKeysPerWriter);
        if (i % 5 == 4) {
          store.remove(ns + "/" + name);
        } else {
          store.update(pod(ns, name, std::to_string(i), "node-" + std::to_string(i % 3)));
        }
      }
    });
  }
  for (auto& writer : writers) writer.join();
  writing = false;
  for (auto& reader : readers) reader.join();

  // Each writer's keys end as its last operation on them left them.
  std::vector<std::string> expected;
  for (int w = 0; w < kThreads; ++w) {
    for (int k = 0; k < kKeysPerWriter; ++k) {
      const int last = kOperations - kKeysPerWriter + k;
      if (last % 5 != 4) expected.push_back("w" + std::to_string(w) + "/p" + std::to_string(k));
    }
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(keys(store.list()), expected);
  EXPECT_EQ(static_cast<std::size_t>(adds - deletes), store.size());
  std::size_t indexed = 0;
  for (const char* node : {"node-0", "node-1", "node-2"})
    indexed += store.by_index("node", node).size();
  EXPECT_EQ(indexed, store.size());
}

}  // namespace
}  // namespace tessel::kube
