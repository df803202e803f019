#include "noderuntime/transport/request.h"

#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {

void Completion::complete() {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = true;
  }
  cv_.notify_all();
}

void Completion::fail(std::string message) {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = true;
    error_ = std::move(message);
  }
  cv_.notify_all();
}

bool Completion::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

void Completion::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  if (error_) throw TransportError(*error_);
}

bool Completion::test() {
  std::lock_guard lock(mu_);
  if (error_) throw TransportError(*error_);
  return done_;
}

}  // namespace tessel::transport
