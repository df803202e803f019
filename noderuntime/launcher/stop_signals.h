// The signals a running launcher reacts to, turned into bytes on a pipe its poll loop watches:
// SIGINT and SIGTERM (the user asks to stop) and SIGCHLD (a stage process ended). The
// handlers are installed for the object's lifetime and the previous ones restored after; one
// instance at a time per process.
#pragma once

#include <vector>

namespace tessel::launcher {

class StopSignals {
 public:
  StopSignals();  // throws std::logic_error when another instance is alive
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  int fd() const { return read_fd_; }  // readable when a signal arrived
  // The signals received since the last call, in order (SIGCHLD included).
  std::vector<int> take();

 private:
  int read_fd_ = -1;
};

}  // namespace tessel::launcher
