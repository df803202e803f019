// A pass that runs on a thread of its own whenever it was asked for since it last ran (several
// requests before it runs make one pass): how the test server's controllers (the garbage
// collector, the token controller) work after the changes that may give them work,
// asynchronously as on a real cluster. A pass that throws is retried at the next request.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace tessel::testing {

class BackgroundPass {
 public:
  // Starts the thread, with one pass due. Declare it after everything the pass reads, so that it
  // stops (and the pass ends) before they go.
  explicit BackgroundPass(std::function<void()> pass);
  ~BackgroundPass();  // stops the thread, after the pass under way
  BackgroundPass(const BackgroundPass&) = delete;
  BackgroundPass& operator=(const BackgroundPass&) = delete;

  void request();

 private:
  void loop();

  const std::function<void()> pass_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool due_ = true;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tessel::testing
