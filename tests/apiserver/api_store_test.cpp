#include "tests/support/api_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

const CollectionKey kJobs{"tessel.dev", "trainingjobs"};
const CollectionKey kNodes{"", "nodes"};

json object(const std::string& namespace_, const std::string& name, int replicas = 1) {
  json metadata = {{"name", name}};
  if (!namespace_.empty()) metadata["namespace"] = namespace_;
  return {{"metadata", metadata}, {"spec", {{"replicas", replicas}}}};
}

std::string version_of(const json& stored) {
  return stored["metadata"]["resourceVersion"].get<std::string>();
}

std::vector<StoredEvent> take_now(WatchSubscription& subscription) {
  return subscription.take(steady_clock::now());
}

TEST(ObjectStore, OneCounterForEveryResourceAndEveryWrite) {
  ObjectStore store(100);
  EXPECT_EQ(store.current_resource_version(), 0);
  const json job = store.create(kJobs, object("default", "a")).object;
  const json node = store.create(kNodes, object("", "n")).object;
  EXPECT_EQ(version_of(job), "1");
  EXPECT_EQ(version_of(node), "2");
  const auto updated = store.update(kJobs, object("default", "a", 2), "1");
  ASSERT_EQ(updated.outcome, ObjectStore::Outcome::kOk);
  EXPECT_EQ(version_of(updated.object), "3");
  EXPECT_EQ(store.current_resource_version(), 3);
  EXPECT_EQ(store.get(kJobs, "default", "a")->at("spec").at("replicas"), 2);
}

TEST(ObjectStore, OptimisticConcurrency) {
  ObjectStore store(100);
  store.create(kJobs, object("default", "a"));
  EXPECT_EQ(store.create(kJobs, object("default", "a")).outcome,
            ObjectStore::Outcome::kAlreadyExists);
  const auto stale = store.update(kJobs, object("default", "a", 5), "0");
  EXPECT_EQ(stale.outcome, ObjectStore::Outcome::kConflict);
  EXPECT_EQ(version_of(stale.object), "1");
  EXPECT_EQ(store.update(kJobs, object("default", "b"), "1").outcome,
            ObjectStore::Outcome::kNotFound);
  EXPECT_EQ(store.remove(kJobs, "default", "a", "7").outcome, ObjectStore::Outcome::kConflict);
  const auto removed = store.remove(kJobs, "default", "a", "1");
  ASSERT_EQ(removed.outcome, ObjectStore::Outcome::kOk);
  EXPECT_EQ(version_of(removed.object), "2");  // the last state, at the deletion's version
  EXPECT_FALSE(store.get(kJobs, "default", "a"));
}

TEST(ObjectStore, ListsSortByStorageKeyAndReconstructPastVersions) {
  ObjectStore store(100);
  store.create(kJobs, object("b-ns", "x"));
  store.create(kJobs, object("default", "c"));
  store.create(kJobs, object("default", "a"));  // version 3
  store.update(kJobs, object("default", "a", 9), "3");
  store.remove(kJobs, "default", "c", "2");
  store.create(kJobs, object("default", "d"));

  const auto now = store.list(kJobs, "default");
  EXPECT_EQ(now.resource_version, 6);
  ASSERT_EQ(now.items.size(), 2u);
  EXPECT_EQ(now.items[0].first, "a");
  EXPECT_EQ(now.items[1].first, "d");

  const auto past = store.list(kJobs, "default", {.at_version = 3});
  EXPECT_EQ(past.resource_version, 3);
  ASSERT_EQ(past.items.size(), 2u);
  EXPECT_EQ(past.items[0].first, "a");
  EXPECT_EQ(past.items[0].second->at("spec").at("replicas"), 1);
  EXPECT_EQ(past.items[1].first, "c");

  const auto everywhere = store.list(kJobs, "");
  ASSERT_EQ(everywhere.items.size(), 3u);
  EXPECT_EQ(everywhere.items[0].first, "b-ns/x");
  EXPECT_EQ(everywhere.items[2].first, "default/d");
}

// The keys of a page, "name" each.
std::vector<std::string> keys(const Page& page) {
  std::vector<std::string> result;
  for (const auto& [key, object] : page.items) result.push_back(key);
  return result;
}

TEST(ObjectStore, PagesStartAtAKeyAndCountTheObjectsAfterThem) {
  ObjectStore store(100);
  for (const char* name : {"a", "b", "c", "d", "e"}) store.create(kJobs, object("default", name));
  // Neighbouring namespaces, one sorting before "default/" and one after it.
  store.create(kJobs, object("default-x", "a"));
  store.create(kJobs, object("defaults", "a"));
  using Keys = std::vector<std::string>;

  const auto first = store.list(kJobs, "default", {.limit = 2});
  EXPECT_EQ(keys(first), (Keys{"a", "b"}));
  EXPECT_EQ(first.remaining, 3u);
  const auto middle = store.list(kJobs, "default", {.start = std::string("b") + '\0', .limit = 2});
  EXPECT_EQ(keys(middle), (Keys{"c", "d"}));
  EXPECT_EQ(middle.remaining, 1u);
  const auto last = store.list(kJobs, "default", {.start = std::string("d") + '\0', .limit = 2});
  EXPECT_EQ(keys(last), (Keys{"e"}));
  EXPECT_EQ(last.remaining, 0u);
  const auto exact = store.list(kJobs, "default", {.start = "d", .limit = 2});
  EXPECT_EQ(keys(exact), (Keys{"d", "e"}));
  EXPECT_EQ(exact.remaining, 0u) << "a page that ends with the collection leaves nothing";

  // A filter skips objects; the objects after a full page are counted, taken or not.
  const auto filtered = store.list(kJobs, "default", {.limit = 1, .filter = [](const json& job) {
                                                        return job["metadata"]["name"] != "a";
                                                      }});
  EXPECT_EQ(keys(filtered), (Keys{"b"}));
  EXPECT_EQ(filtered.remaining, 3u);

  EXPECT_EQ(keys(store.list(kJobs, "")), (Keys{"default-x/a", "default/a", "default/b", "default/c",
                                               "default/d", "default/e", "defaults/a"}));
}

TEST(ObjectStore, PagesAtAPastVersionSeeTheCollectionAsItWasThen) {
  ObjectStore store(100);
  for (const char* name : {"a", "c", "e", "g"}) store.create(kJobs, object("default", name));
  const std::int64_t then = store.current_resource_version();
  store.create(kJobs, object("default", "b"));          // added since
  store.remove(kJobs, "default", "c", "2");             // deleted since
  store.update(kJobs, object("default", "e", 7), "3");  // modified since
  store.update(kJobs, object("default", "e", 8), "7");  // and again
  store.create(kJobs, object("default", "f"));
  store.create(kJobs, object("other", "a"));  // another namespace
  using Keys = std::vector<std::string>;

  const auto first = store.list(kJobs, "default", {.at_version = then, .limit = 2});
  EXPECT_EQ(first.resource_version, then);
  EXPECT_EQ(keys(first), (Keys{"a", "c"}));
  EXPECT_EQ(first.remaining, 2u);
  const auto rest = store.list(kJobs, "default",
                               {.at_version = then, .start = std::string("c") + '\0', .limit = 2});
  EXPECT_EQ(keys(rest), (Keys{"e", "g"}));
  EXPECT_EQ(rest.items[0].second->at("spec").at("replicas"), 1);
  EXPECT_EQ(rest.remaining, 0u);
  const auto partial = store.list(kJobs, "default", {.at_version = then, .start = "b", .limit = 1});
  EXPECT_EQ(keys(partial), (Keys{"c"}));
  EXPECT_EQ(partial.remaining, 2u);

  const auto now = store.list(kJobs, "default", {.limit = 2});
  EXPECT_EQ(keys(now), (Keys{"a", "b"}));
  EXPECT_EQ(now.remaining, 3u);
}

TEST(ObjectStore, PastVersionsOlderThanTheWindowAreGone) {
  ObjectStore store(3);
  for (int i = 0; i < 6; ++i) store.create(kJobs, object("default", "j" + std::to_string(i)));
  EXPECT_EQ(store.window_start(), 3);
  EXPECT_THROW(store.list(kJobs, "default", {.at_version = 2}), std::out_of_range);
  EXPECT_EQ(store.list(kJobs, "default", {.at_version = 3}).items.size(), 3u);
  std::int64_t window_start = 0;
  EXPECT_EQ(store.watch(kJobs, "", 2, &window_start), nullptr);
  EXPECT_EQ(window_start, 3);
  EXPECT_NE(store.watch(kJobs, "", 3, nullptr), nullptr);
}

TEST(ObjectStore, WatchFromAVersionReplaysLaterEventsThenFollows) {
  ObjectStore store(100);
  store.create(kJobs, object("default", "a"));
  store.create(kNodes, object("", "n"));
  store.update(kJobs, object("default", "a", 2), "1");
  auto subscription = store.watch(kJobs, "default", 1, nullptr);
  ASSERT_NE(subscription, nullptr);
  auto events = take_now(*subscription);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, StoredEvent::Type::kModified);
  EXPECT_EQ(events[0].resource_version, 3);
  EXPECT_EQ(events[0].previous->at("spec").at("replicas"), 1);

  store.create(kJobs, object("other", "x"));  // another namespace: not for this watch
  store.remove(kJobs, "default", "a", "3");
  events = subscription->take(steady_clock::now() + milliseconds(1000));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, StoredEvent::Type::kDeleted);
  EXPECT_EQ(version_of(*events[0].object), "5");
  EXPECT_EQ(events[0].object->at("spec").at("replicas"), 2);
}

TEST(ObjectStore, WatchWithoutVersionStartsWithTheCurrentObjects) {
  ObjectStore store(100);
  store.create(kJobs, object("default", "a"));
  store.create(kJobs, object("default", "b"));
  auto subscription = store.watch(kJobs, "", std::nullopt, nullptr);
  const auto events = take_now(*subscription);
  ASSERT_EQ(events.size(), 2u);
  for (const StoredEvent& event : events) EXPECT_EQ(event.type, StoredEvent::Type::kAdded);
  EXPECT_EQ(events[1].resource_version, 2);
}

TEST(ObjectStore, AWatchWaitsForEventsWithoutBlockingWriters) {
  ObjectStore store(100);
  auto slow = store.watch(kJobs, "", 0, nullptr);  // never read until the end
  auto reader = store.watch(kJobs, "", 0, nullptr);
  std::thread writer([&] {
    for (int i = 0; i < 50; ++i) store.create(kJobs, object("default", "j" + std::to_string(i)));
  });
  std::size_t seen = 0;
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (seen < 50 && steady_clock::now() < deadline) seen += reader->take(deadline).size();
  writer.join();
  EXPECT_EQ(seen, 50u);
  EXPECT_EQ(take_now(*slow).size(), 50u);
}

TEST(ObjectStore, EndingWatchesWakesTheirReaders) {
  ObjectStore store(100);
  auto subscription = store.watch(kJobs, "", 0, nullptr);
  std::thread ender([&] { store.end_watches(WatchSubscription::End::kDropped); });
  const auto started = steady_clock::now();
  subscription->take(started + std::chrono::seconds(10));
  ender.join();
  EXPECT_LT(steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(subscription->ended(), WatchSubscription::End::kDropped);
}

TEST(ObjectStore, RestartedWatchCacheExpiresEveryEarlierVersion) {
  ObjectStore store(100);
  store.create(kJobs, object("default", "a"));
  store.create(kJobs, object("default", "b"));
  auto open = store.watch(kJobs, "", 2, nullptr);
  store.restart_watch_cache();
  EXPECT_EQ(open->ended(), WatchSubscription::End::kDropped);
  EXPECT_EQ(store.window_start(), 2);
  EXPECT_EQ(store.watch(kJobs, "", 1, nullptr), nullptr);
  EXPECT_NE(store.watch(kJobs, "", 2, nullptr), nullptr);
  EXPECT_EQ(store.latest_version_of(kNodes), 2);  // bookmarks never go back before the restart
}

TEST(ObjectStore, WaitsForAFutureVersion) {
  ObjectStore store(100);
  EXPECT_FALSE(store.wait_for_version(1, milliseconds(10)));
  std::thread writer([&] { store.create(kJobs, object("default", "a")); });
  EXPECT_TRUE(store.wait_for_version(1, std::chrono::seconds(10)));
  writer.join();
}

TEST(ObjectStore, TellsItsListenerAboutEveryChange) {
  ObjectStore store(100);
  int changes = 0;
  store.set_change_listener([&](const StoredEvent&) { ++changes; });
  store.create(kJobs, object("default", "a"));
  store.update(kJobs, object("default", "a", 3), "1");
  store.remove(kJobs, "default", "a", "2");
  EXPECT_EQ(changes, 3);
  EXPECT_EQ(store.latest_version_of(kJobs), 3);
}

}  // namespace
}  // namespace tessel::testing
