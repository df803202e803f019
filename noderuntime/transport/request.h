// The handle of an asynchronous transport operation (isend, irecv, iall_reduce). A backend
// creates a Completion, returns Request(completion) at once and later calls complete() or
// fail() from whichever thread finishes the work; the caller overlaps its own work and then
// wait()s or test()s. The buffers an operation names must stay valid and untouched until its
// request is complete (or has failed).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace tessel::transport {

class Completion {
 public:
  // The first of complete() / fail() wins; later calls are ignored (an operation that has
  // finished cannot be failed afterwards by a closing communicator).
  void complete();
  void fail(std::string message);

  bool done() const;
  // Blocks until done. Throws TransportError with the failure message if it failed.
  void wait();
  // True when done; throws TransportError if it failed.
  bool test();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::optional<std::string> error_;
};

class Request {
 public:
  Request() = default;  // an empty request: already complete
  explicit Request(std::shared_ptr<Completion> completion) : completion_(std::move(completion)) {}

  void wait() {
    if (completion_) completion_->wait();
  }
  bool test() { return !completion_ || completion_->test(); }

 private:
  std::shared_ptr<Completion> completion_;
};

}  // namespace tessel::transport
