// Which changes wake the API test server's garbage collector: a pass looks at every object, so
// only changes that can give it work may start one (what it then does is tested through the
// server in api_server_test.cpp).
#include "tests/support/api_garbage_collector.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>

namespace tessel::testing {
namespace {

using nlohmann::json;
using Type = StoredEvent::Type;

const CollectionKey kConfigMaps{"", "configmaps"};
const CollectionKey kNodes{"", "nodes"};
const CollectionKey kCrds{"apiextensions.k8s.io", "customresourcedefinitions"};

StoredObject stored(json metadata) {
  return std::make_shared<const json>(json{{"metadata", std::move(metadata)}});
}

StoredEvent change(Type type, const CollectionKey& collection, StoredObject object,
                   StoredObject previous = nullptr) {
  return {type, 2, collection, "default", "x", std::move(object), std::move(previous)};
}

const json kOwned = {
    {"name", "x"},
    {"ownerReferences",
     json::array(
         {{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "owner"}, {"uid", "u-1"}}})}};
const json kTerminating = {{"name", "x"},
                           {"deletionTimestamp", "2026-01-01T00:00:00Z"},
                           {"finalizers", {"example.com/hold"}}};

TEST(GarbageCollectorWork, PlainWritesDoNotStartAPass) {
  const StoredObject plain = stored({{"name", "x"}, {"labels", {{"a", "b"}}}});
  EXPECT_FALSE(GarbageCollector::may_give_work(change(Type::kAdded, kConfigMaps, plain)));
  EXPECT_FALSE(GarbageCollector::may_give_work(
      change(Type::kModified, kConfigMaps, plain, stored({{"name", "x"}}))));
  const StoredObject ttl =
      stored({{"name", "n"}, {"annotations", {{"node.alpha.kubernetes.io/ttl", "0"}}}});
  EXPECT_FALSE(GarbageCollector::may_give_work(change(Type::kModified, kNodes, ttl, ttl)));
}

TEST(GarbageCollectorWork, DeletionsOwnersAndTerminatingObjectsStartAPass) {
  const StoredObject plain = stored({{"name", "x"}});
  EXPECT_TRUE(GarbageCollector::may_give_work(change(Type::kDeleted, kConfigMaps, plain, plain)));
  // A dependent appears, or stops depending (its owner may wait for that).
  EXPECT_TRUE(GarbageCollector::may_give_work(change(Type::kAdded, kConfigMaps, stored(kOwned))));
  EXPECT_TRUE(
      GarbageCollector::may_give_work(change(Type::kModified, kConfigMaps, plain, stored(kOwned))));
  // Deletion starts, or a finalizer of a terminating object goes.
  EXPECT_TRUE(GarbageCollector::may_give_work(
      change(Type::kModified, kConfigMaps, stored(kTerminating), plain)));
  EXPECT_TRUE(GarbageCollector::may_give_work(
      change(Type::kModified, kConfigMaps, stored(kTerminating), stored(kTerminating))));
  // A CRD may make an owner's kind known; a new Node needs its TTL annotation.
  EXPECT_TRUE(GarbageCollector::may_give_work(change(Type::kAdded, kCrds, plain)));
  EXPECT_TRUE(
      GarbageCollector::may_give_work(change(Type::kAdded, kNodes, stored({{"name", "n"}}))));
}

}  // namespace
}  // namespace tessel::testing
