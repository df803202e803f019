// Watches the Pods of one namespace for the process kubelet's tests: an informer whose handlers
// record every state each pod was seen in and wake the waiters, so a test blocks until a pod
// reaches a state (or disappears) instead of polling.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/informer.h"

namespace tessel::testing {

class PodWatcher {
 public:
  PodWatcher(kube::Client& client, const std::string& ns)
      : namespace_(ns), informer_(client, client.resource_for("v1", "Pod"), ns) {
    informer_.add_event_handler(
        {.on_add = [this](const nlohmann::json& pod) { record(pod); },
         .on_update = [this](const nlohmann::json&, const nlohmann::json& pod) { record(pod); },
         .on_delete = [this](const nlohmann::json& pod, bool) { record(pod); }});
    informer_.start();
    std::stop_source never;
    informer_.wait_for_sync(never.get_token());
  }

  // Blocks until `condition` holds for the pod as cached (nullptr: it does not exist) and
  // returns that state (null when absent). After `timeout` the test fails and the last state
  // is returned.
  nlohmann::json wait_for(const std::string& name,
                          const std::function<bool(const nlohmann::json* pod)>& condition,
                          std::chrono::seconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(mutex_);
    while (true) {
      const kube::ObjectSnapshot pod = informer_.store().get(namespace_ + "/" + name);
      if (condition(pod.get())) return pod ? *pod : nlohmann::json();
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
        const kube::ObjectSnapshot last = informer_.store().get(namespace_ + "/" + name);
        ADD_FAILURE() << "timed out waiting for pod " << name
                      << "; last seen: " << (last ? last->dump() : std::string("absent"));
        return last ? *last : nlohmann::json();
      }
    }
  }

  nlohmann::json wait_for_phase(const std::string& name, const std::string& phase) {
    return wait_for(name, [&](const nlohmann::json* pod) {
      return pod && pod->value("status", nlohmann::json::object()).value("phase", "") == phase;
    });
  }

  void wait_until_gone(const std::string& name) {
    wait_for(name, [](const nlohmann::json* pod) { return pod == nullptr; });
  }

  // Every state the pod was seen in, in order; the last one a deletion's final state.
  std::vector<nlohmann::json> history(const std::string& name) {
    std::lock_guard lock(mutex_);
    return history_[name];
  }

 private:
  void record(const nlohmann::json& pod) {
    std::lock_guard lock(mutex_);
    history_[pod["metadata"].value("name", "")].push_back(pod);
    changed_.notify_all();
  }

  const std::string namespace_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<nlohmann::json>> history_;
  kube::SharedInformer informer_;  // last: its handlers use the members above
};

}  // namespace tessel::testing
