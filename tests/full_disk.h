// A full disk for tests, played by RLIMIT_FSIZE: while a FullDisk lives, writes that would grow a
// file past `bytes` fail with EFBIG, as writes on a full file system fail with ENOSPC, and
// processes started meanwhile inherit the limit. SIGXFSZ (which would otherwise end the
// process) is ignored unless the test wants to see what a child does with it by default. The
// previous limit and handler come back when it ends, also when an assertion leaves the test early.
#pragma once

#include <signal.h>
#include <sys/resource.h>

#include <stdexcept>
#include <string>

namespace tessel::testing {

class FullDisk {
 public:
  explicit FullDisk(rlim_t bytes, bool ignore_sigxfsz = true) : ignored_(ignore_sigxfsz) {
    if (ignored_) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigaction(SIGXFSZ, &ignore, &previous_handler_);
    }
    getrlimit(RLIMIT_FSIZE, &previous_limit_);
    rlimit small = previous_limit_;
    small.rlim_cur = bytes;
    if (setrlimit(RLIMIT_FSIZE, &small) != 0) {
      restore();
      throw std::runtime_error("cannot set RLIMIT_FSIZE to " + std::to_string(bytes));
    }
  }
  ~FullDisk() { restore(); }
  FullDisk(const FullDisk&) = delete;
  FullDisk& operator=(const FullDisk&) = delete;

  // Ends the full disk before the object does (e.g. once the child processes are started).
  void restore() {
    if (restored_) return;
    restored_ = true;
    setrlimit(RLIMIT_FSIZE, &previous_limit_);
    if (ignored_) sigaction(SIGXFSZ, &previous_handler_, nullptr);
  }

 private:
  bool ignored_;
  bool restored_ = false;
  rlimit previous_limit_{};
  struct sigaction previous_handler_ {};
};

}  // namespace tessel::testing
