#include "noderuntime/launcher/stop_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tessel::launcher {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGCHLD};
std::atomic<int> g_write_fd{-1};
struct sigaction g_previous[3];

extern "C" void on_signal(int signal) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  const int fd = g_write_fd.load();
  if (fd >= 0) {
    [[maybe_unused]] const ssize_t n = write(fd, &byte, 1);  // full pipe: a byte is pending
  }
  errno = saved_errno;
}

}  // namespace

StopSignals::StopSignals() {
  static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free int");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("cannot create the signal pipe: ") + strerror(errno));
  }
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    close(fds[0]);
    close(fds[1]);
    throw std::logic_error("a launcher is already running in this process");
  }
  read_fd_ = fds[0];
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  close(g_write_fd.exchange(-1));
  close(read_fd_);
}

std::vector<int> StopSignals::take() {
  std::vector<int> signals;
  unsigned char bytes[64];
  ssize_t n;
  while ((n = read(read_fd_, bytes, sizeof bytes)) > 0)
    signals.insert(signals.end(), bytes, bytes + n);
  return signals;
}

}  // namespace tessel::launcher
