// What the client acceptance tests (cluster_*_test.cpp) share: waits with deadlines that suit
// a real cluster as well as the API test server, an informer set up to recover quickly from
// injected faults, and a recorder of what an informer's handlers were told.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kube/informer.h"
#include "kube/object.h"
#include "kube/object_store.h"

namespace tessel::kube::testing {

// Long enough for a real cluster under load; only a broken client or server waits this long.
inline constexpr auto kClusterTimeout = std::chrono::seconds(15);

// How long cascading deletion may take. kube-controller-manager's garbage collector learns of a
// new CRD's resource only at its next discovery sync (every 30 s), so the first run against a
// cluster that has just got the test CRD may wait that long for dependents of a TestJob.
inline constexpr auto kGarbageCollectionTimeout = std::chrono::seconds(60);

// Polls `condition` (which asks the server) every 10 ms until it holds or `timeout` passes.
template <typename Condition>
bool poll_until(Condition condition, std::chrono::milliseconds timeout = kClusterTimeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// resourceVersions are opaque to clients, but every API server tessel supports hands out etcd
// revisions (decimal integers), which tests may order.
inline std::int64_t version_of(const nlohmann::json& object) {
  return std::stoll(object_resource_version(object));
}

// An informer that retries within tens of milliseconds after a fault instead of client-go's
// 800 ms backoff, so that fault tests stay fast.
inline InformerOptions quick_recovery_options() {
  InformerOptions options;
  options.reflector.backoff.initial = std::chrono::milliseconds(20);
  options.reflector.backoff.cap = std::chrono::milliseconds(200);
  return options;
}

// What an informer's handlers were told: the objects they believe exist, and for each key the
// resourceVersions delivered by on_add and on_update, in order. Tests wait on it; every
// handler call wakes them. Declare it before the informer: the informer's thread may call the
// handler until the informer is destroyed.
class InformerLog {
 public:
  struct State {
    std::map<std::string, nlohmann::json> objects;
    std::map<std::string, std::vector<std::int64_t>> versions;
    std::map<std::string, int> deletes;               // on_delete calls per key
    std::map<std::string, int> unknown_final_states;  // of those, final_state_unknown
  };

  EventHandler handler() {
    return EventHandler{
        .on_add = [this](const nlohmann::json& object) { record(object); },
        .on_update = [this](const nlohmann::json&,
                            const nlohmann::json& object) { record(object); },
        .on_delete =
            [this](const nlohmann::json& last, bool final_state_unknown) {
              {
                std::lock_guard lock(mutex_);
                const std::string key = object_key(last);
                state_.objects.erase(key);
                ++state_.deletes[key];
                if (final_state_unknown) ++state_.unknown_final_states[key];
              }
              changed_.notify_all();
            },
    };
  }

  // Waits until `condition` holds for the recorded state, or kClusterTimeout passes.
  bool wait_for(const std::function<bool(const State&)>& condition) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kClusterTimeout, [&] { return condition(state_); });
  }

  // Waits until the handlers were told of `key` at `version` or later.
  bool wait_for_version(const std::string& key, std::int64_t version) {
    return wait_for([&](const State& state) {
      const auto found = state.objects.find(key);
      return found != state.objects.end() && version_of(found->second) >= version;
    });
  }

  State state() {
    std::lock_guard lock(mutex_);
    return state_;
  }

 private:
  void record(const nlohmann::json& object) {
    {
      std::lock_guard lock(mutex_);
      const std::string key = object_key(object);
      state_.objects[key] = object;
      state_.versions[key].push_back(version_of(object));
    }
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  State state_;
};

}  // namespace tessel::kube::testing
