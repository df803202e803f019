// Real-time waits for tests with threads. Each bound only runs out when the code under test is
// broken; a failed wait then ends the whole binary, because a test thread may still be blocked
// on (or running against) objects the test is about to destroy.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

namespace tessel::kube::testing {

inline constexpr auto kFailureTimeout = std::chrono::seconds(5);

inline void require(bool ok, const char* what) {
  if (!ok) {
    ADD_FAILURE() << "timed out: " << what;
    std::abort();
  }
}

template <typename T>
bool finishes(std::future<T>& future) {
  return future.wait_for(kFailureTimeout) == std::future_status::ready;
}

template <typename Condition>
bool eventually(Condition condition) {
  const auto deadline = std::chrono::steady_clock::now() + kFailureTimeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace tessel::kube::testing
