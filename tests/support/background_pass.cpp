#include "tests/support/background_pass.h"

#include <exception>
#include <utility>

namespace tessel::testing {

BackgroundPass::BackgroundPass(std::function<void()> pass)
    : pass_(std::move(pass)), thread_([this] { loop(); }) {}

BackgroundPass::~BackgroundPass() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void BackgroundPass::request() {
  {
    std::lock_guard lock(mutex_);
    due_ = true;
  }
  wake_.notify_all();
}

void BackgroundPass::loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return due_ || stopping_; });
    if (stopping_) return;
    due_ = false;
    lock.unlock();
    try {
      pass_();
    } catch (const std::exception&) {
      // A pass that failed part way is retried on the next request.
    }
    lock.lock();
  }
}

}  // namespace tessel::testing
