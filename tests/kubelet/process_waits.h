// Waits on processes for the process kubelet's tests, each bounded so that a broken kubelet
// fails the test instead of hanging it: a process's message through a named pipe (the test
// blocks until the process has written a line), a process's end through a pidfd, and a
// callback through a condition variable. None of them sleeps.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>

namespace tessel::testing {

inline constexpr std::chrono::seconds kProcessTimeout{10};

// The first line (newline included) a process writes into the FIFO at `path`; "" (and a test
// failure) when none came within the timeout. A line, not end of file: when the writer opened
// the FIFO before this reader, Linux reports no hang-up once it closes it.
inline std::string read_fifo(const std::string& path,
                             std::chrono::milliseconds timeout = kProcessTimeout) {
  // Non-blocking, so that the open itself never waits.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    ADD_FAILURE() << "cannot open the FIFO " << path;
    return "";
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string text;
  while (text.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd entry{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&entry, 1, static_cast<int>(left.count())) <= 0) {
      ADD_FAILURE() << "no line written to " << path << " in time (got \"" << text << "\")";
      break;
    }
    char buffer[512];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      ADD_FAILURE() << "the writer of " << path << " closed it after \"" << text << "\"";
      break;
    }
  }
  ::close(fd);
  return text;
}

// The process is gone or a zombie (killed, waiting for a parent that does not reap it).
inline bool is_dead(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string comm_and_before;
  char state = '?';
  if (std::getline(stat, comm_and_before, ')') && (stat >> state)) return state == 'Z';
  return true;  // vanished meanwhile
}

// Blocks until the process `pid` (any process, not only a child) has ended.
inline bool wait_until_dead(pid_t pid, std::chrono::milliseconds timeout = kProcessTimeout) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd entry{fd, POLLIN, 0};
  const bool ended = ::poll(&entry, 1, static_cast<int>(timeout.count())) == 1;
  ::close(fd);
  return ended && is_dead(pid);
}

// A one-shot event, notified from another thread.
class ExitSignal {
 public:
  void notify() {
    std::lock_guard lock(mutex_);
    done_ = true;
    changed_.notify_all();
  }
  bool wait(std::chrono::milliseconds timeout = kProcessTimeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return done_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool done_ = false;
};

}  // namespace tessel::testing
