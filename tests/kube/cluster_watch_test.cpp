// The informer against a cluster: every update of a burst seen in order, a watch resumed from
// the last resourceVersion after a dropped connection, a relist after 410 Gone (with the
// deletions missed meanwhile reported), and a cache equal to the server's after a run of
// injected faults (dropped watches, 500 and 429 answers, a partition, latency, a watch cache
// restart). Fault tests need the API test server.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "tests/kube/cluster_test_support.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using tessel::testing::ApiTestServer;
using tessel::testing::test_job;
using tessel::testing::TestCluster;
using testing::InformerLog;
using testing::poll_until;
using testing::quick_recovery_options;
using testing::version_of;

const ResourceInfo& configmaps() {
  static const ResourceInfo info = *ResourceRegistry().find_resource("", "configmaps");
  return info;
}

// key -> resourceVersion.
using Versions = std::map<std::string, std::int64_t>;

Versions versions_of(const std::map<std::string, json>& objects) {
  Versions versions;
  for (const auto& [key, object] : objects) versions[key] = version_of(object);
  return versions;
}

bool strictly_increasing(const std::vector<std::int64_t>& versions) {
  return std::adjacent_find(versions.begin(), versions.end(), std::greater_equal<>()) ==
         versions.end();
}

// The watch requests the server saw, in order.
std::vector<std::string> watch_requests(const ApiTestServer& server) {
  std::vector<std::string> watches;
  for (const std::string& line : server.request_log()) {
    if (line.find("watch=true") != std::string::npos) watches.push_back(line);
  }
  return watches;
}

class ClusterWatchTest : public ::testing::Test {
 protected:
  ClusterWatchTest() : jobs_(cluster_.ensure_test_crd()), ns_(cluster_.namespace_name()) {}

  std::string key(const std::string& name) const { return ns_ + "/" + name; }

  json create(const std::string& name) { return writer_->create(jobs_, ns_, test_job(ns_, name)); }
  json scale(const std::string& name, int replicas) {
    return writer_->patch(jobs_, ns_, name, PatchType::kMerge,
                          {{"spec", {{"replicas", replicas}}}});
  }

  // What the server holds now, by key.
  Versions server_versions() {
    Versions versions;
    for (const json& item : writer_->list_all(jobs_, ns_).items) {
      versions[object_key(item)] = version_of(item);
    }
    return versions;
  }

  // Waits until the handlers and the cache both hold exactly what the server holds.
  void expect_caught_up(SharedInformer& informer, InformerLog& log) {
    const Versions expected = server_versions();
    EXPECT_TRUE(log.wait_for([&](const InformerLog::State& state) {
      return versions_of(state.objects) == expected;
    })) << "handlers never caught up with the server";
    Versions cached;
    for (const ObjectSnapshot& object : informer.store().list()) {
      cached[object_key(*object)] = version_of(*object);
    }
    EXPECT_EQ(cached, expected);
  }

  TestCluster cluster_;
  const ResourceInfo jobs_;
  const std::string ns_;
  const std::shared_ptr<Client> writer_ = cluster_.client();
  const std::shared_ptr<Client> reader_ = cluster_.client();
};

TEST_F(ClusterWatchTest, BurstOfAThousandUpdatesIsSeenInOrder) {
  constexpr int kObjects = 10;
  constexpr int kUpdatesPerObject = 100;
  constexpr int kWriters = 2;
  std::map<std::string, std::vector<std::int64_t>> written;  // key -> every version, in order
  for (int i = 0; i < kObjects; ++i) {
    const json created = create("burst-" + std::to_string(i));
    written[object_key(created)].push_back(version_of(created));
  }
  InformerLog log;
  SharedInformer informer(*reader_, jobs_, ns_);
  informer.add_event_handler(log.handler());
  informer.start();
  ASSERT_TRUE(informer.wait_for_sync({}));

  // Each writer owns every kWriters-th object, so each key's versions are written in order.
  std::vector<std::map<std::string, std::vector<std::int64_t>>> per_writer(kWriters);
  {
    std::vector<std::jthread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        const std::shared_ptr<Client> client = cluster_.client();
        try {
          for (int update = 0; update < kUpdatesPerObject; ++update) {
            for (int i = w; i < kObjects; i += kWriters) {
              const json patched =
                  client->patch(jobs_, ns_, "burst-" + std::to_string(i), PatchType::kMerge,
                                {{"spec", {{"replicas", update + 2}}}});
              per_writer[w][object_key(patched)].push_back(version_of(patched));
            }
          }
        } catch (const std::exception& error) {
          ADD_FAILURE() << "writer " << w << ": " << error.what();
        }
      });
    }
  }
  for (const auto& versions : per_writer) {
    for (const auto& [key, list] : versions) {
      written[key].insert(written[key].end(), list.begin(), list.end());
    }
  }

  ASSERT_TRUE(log.wait_for([&](const InformerLog::State& state) {
    return std::all_of(written.begin(), written.end(), [&](const auto& entry) {
      const auto found = state.objects.find(entry.first);
      return found != state.objects.end() && version_of(found->second) == entry.second.back();
    });
  })) << "the informer never saw the final state of every object";

  const InformerLog::State state = log.state();
  for (const auto& [key, versions] : written) {
    EXPECT_EQ(state.objects.at(key)["spec"]["replicas"], kUpdatesPerObject + 1) << key;
    const std::vector<std::int64_t>& seen = state.versions.at(key);
    EXPECT_TRUE(strictly_increasing(seen)) << key;
    // Without a relist every single update arrives. A real cluster may compact its history
    // during the burst and answer a resumed watch with 410; the relist that follows
    // legitimately skips intermediate versions.
    if (informer.reflector().lists() == 1) {
      EXPECT_EQ(seen, versions) << key;
    }
  }
  if (!cluster_.is_real()) {
    EXPECT_EQ(informer.reflector().lists(), 1);
  }
}

TEST_F(ClusterWatchTest, WatchResumesAfterADroppedConnection) {
  TESSEL_REQUIRE_TEST_SERVER(cluster_, "drop_watches");
  InformerLog log;
  SharedInformer informer(*reader_, jobs_, ns_, quick_recovery_options());
  informer.add_event_handler(log.handler());
  informer.start();
  ASSERT_TRUE(informer.wait_for_sync({}));
  const json first = create("a");
  ASSERT_TRUE(log.wait_for_version(key("a"), version_of(first)));
  ASSERT_EQ(watch_requests(*cluster_.server()).size(), 1u);

  cluster_.server()->drop_watches();
  const json scaled = scale("a", 2);
  const json second = create("b");
  ASSERT_TRUE(log.wait_for_version(key("a"), version_of(scaled)));
  ASSERT_TRUE(log.wait_for_version(key("b"), version_of(second)));

  // Resumed, not relisted: one list, and every version once, in order.
  EXPECT_EQ(informer.reflector().lists(), 1);
  EXPECT_GE(informer.reflector().watches(), 2);
  const InformerLog::State state = log.state();
  EXPECT_EQ(state.versions.at(key("a")),
            (std::vector<std::int64_t>{version_of(first), version_of(scaled)}));
  EXPECT_EQ(state.versions.at(key("b")), std::vector<std::int64_t>{version_of(second)});
  // The second watch started from a version the first one had reached.
  const std::vector<std::string> watches = watch_requests(*cluster_.server());
  ASSERT_GE(watches.size(), 2u);
  const std::string& resumed = watches[1];
  const auto at = resumed.find("resourceVersion=");
  ASSERT_NE(at, std::string::npos) << resumed;
  EXPECT_GE(std::stoll(resumed.substr(at + 16)), version_of(first)) << resumed;
}

TEST_F(ClusterWatchTest, RelistAfterGoneReportsDeletionsMissedMeanwhile) {
  TESSEL_REQUIRE_TEST_SERVER(cluster_, "restart_watch_cache");
  InformerOptions options = quick_recovery_options();
  // Long enough for the test's writes to land before the reflector watches again, even on a
  // loaded machine.
  options.reflector.backoff.initial = std::chrono::milliseconds(300);
  options.reflector.backoff.cap = std::chrono::seconds(1);
  InformerLog log;
  SharedInformer informer(*reader_, jobs_, ns_, options);
  informer.add_event_handler(log.handler());
  create("doomed");
  informer.start();
  ASSERT_TRUE(informer.wait_for_sync({}));
  // Once an object created now has arrived, the reflector's watch is open: the restart below
  // then cuts it (instead of coming before it), and the reflector backs off before watching
  // again.
  const json kept = create("kept");
  ASSERT_TRUE(log.wait_for_version(key("kept"), version_of(kept)));
  // A write to another resource moves the server past every version the informer has seen,
  // so that its next watch is too old once the watch cache restarts.
  writer_->create(configmaps(), ns_,
                  {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", {{"name", "bump"}, {"namespace", ns_}}}});

  cluster_.server()->restart_watch_cache();
  writer_->remove(jobs_, ns_, "doomed");
  const json added = create("added");

  ASSERT_TRUE(log.wait_for_version(key("added"), version_of(added)));
  ASSERT_TRUE(log.wait_for(
      [&](const InformerLog::State& state) { return state.deletes.count(key("doomed")) > 0; }));
  // The reflector counts a list after the handlers have heard of it.
  ASSERT_TRUE(poll_until([&] { return informer.reflector().lists() >= 2; }));
  EXPECT_EQ(informer.reflector().lists(), 2);
  const InformerLog::State state = log.state();
  EXPECT_EQ(state.deletes.at(key("doomed")), 1);
  // The relist found it gone: its final state is unknown to the informer.
  EXPECT_EQ(state.unknown_final_states.count(key("doomed")), 1u);
  EXPECT_EQ(state.versions.at(key("kept")).size(), 1u);  // unchanged: no spurious update
  expect_caught_up(informer, log);
}

TEST_F(ClusterWatchTest, CacheMatchesTheServerAfterFaults) {
  TESSEL_REQUIRE_TEST_SERVER(cluster_, "fault injection");
  ApiTestServer& server = *cluster_.server();
  InformerLog log;
  SharedInformer informer(*reader_, jobs_, ns_, quick_recovery_options());
  informer.add_event_handler(log.handler());
  for (int i = 0; i < 6; ++i) create("f-" + std::to_string(i));
  informer.start();
  ASSERT_TRUE(informer.wait_for_sync({}));
  expect_caught_up(informer, log);

  // Injected answers hit the next requests, whoever sends them: each is made to hit the
  // reflector's watch requests alone, by waiting until it has sent them before writing.
  auto fail_reflector_requests = [&](int count, int status, int retry_after_seconds) {
    const std::size_t before = server.request_log().size();
    server.fail_next(count, status, retry_after_seconds, /*include_watches=*/true);
    server.drop_watches();
    ASSERT_TRUE(poll_until(
        [&] { return server.request_log().size() >= before + static_cast<std::size_t>(count); }));
  };

  server.drop_watches();
  scale("f-0", 2);
  writer_->remove(jobs_, ns_, "f-1");
  expect_caught_up(informer, log);

  fail_reflector_requests(3, 500, -1);
  create("f-6");
  scale("f-2", 3);
  expect_caught_up(informer, log);

  fail_reflector_requests(2, 429, 0);
  writer_->remove(jobs_, ns_, "f-3");
  expect_caught_up(informer, log);

  server.partition(std::chrono::milliseconds(150));
  // The writer's connections are refused too: its client retries GET and PUT (idempotent)
  // until the partition heals.
  json f4 = writer_->get(jobs_, ns_, "f-4");
  f4["spec"]["replicas"] = 4;
  writer_->update(jobs_, f4);
  create("f-7");
  expect_caught_up(informer, log);

  server.set_latency(std::chrono::milliseconds(20));
  for (int i = 0; i < 3; ++i) scale("f-5", 5 + i);
  server.drop_watches();
  writer_->remove(jobs_, ns_, "f-0");
  server.set_latency(std::chrono::milliseconds(0));
  expect_caught_up(informer, log);

  writer_->create(configmaps(), ns_,
                  {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", {{"name", "bump"}, {"namespace", ns_}}}});
  server.restart_watch_cache();
  scale("f-6", 6);
  expect_caught_up(informer, log);
  // The restart forced a relist.
  EXPECT_TRUE(poll_until([&] { return informer.reflector().lists() >= 2; }));

  // The handlers heard of every version in order and of each deletion once.
  const InformerLog::State state = log.state();
  for (const auto& [key, versions] : state.versions) {
    EXPECT_TRUE(strictly_increasing(versions)) << key;
  }
  for (const auto& [key, deletes] : state.deletes) EXPECT_EQ(deletes, 1) << key;
  EXPECT_EQ(state.deletes.size(), 3u);
}

}  // namespace
}  // namespace tessel::kube
