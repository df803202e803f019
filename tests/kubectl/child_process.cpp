#include "tests/kubectl/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace tessel::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The slice of a wait after which the child's exit is checked again: a child that exits while
// a grandchild keeps its pipes open is noticed this quickly.
constexpr auto kExitCheckInterval = std::chrono::milliseconds(20);

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string join(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& arg : argv) text += (text.empty() ? "" : " ") + arg;
  return text;
}

}  // namespace

std::optional<std::string> find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::istringstream directories(path);
  std::string directory;
  while (std::getline(directories, directory, ':')) {
    const std::string candidate = (directory.empty() ? "." : directory) + "/" + program;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return std::nullopt;
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("ChildProcess: empty command line");
  // Resolved here: between fork and exec only async-signal-safe calls are allowed, and the
  // parent has threads (the test server's).
  const std::optional<std::string> program =
      argv[0].find('/') == std::string::npos ? find_on_path(argv[0]) : argv[0];
  if (!program) throw std::runtime_error("cannot run `" + join(argv) + "`: not found on $PATH");
  int out_pipe[2], err_pipe[2], exec_error_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(exec_error_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("cannot create pipes for " + argv[0] + ": " + std::strerror(errno));

  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  pid_ = ::fork();
  if (pid_ < 0) {
    const int error = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], exec_error_pipe[0],
                   exec_error_pipe[1]})
      ::close(fd);
    throw std::runtime_error("cannot fork for " + argv[0] + ": " + std::strerror(error));
  }
  if (pid_ == 0) {
    // The child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execv(program->c_str(), args.data());
    const int error = errno;
    [[maybe_unused]] auto written = ::write(exec_error_pipe[1], &error, sizeof error);
    ::_exit(127);
  }
  // Also set the group here, so that it exists before anyone signals it.
  ::setpgid(pid_, pid_);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_error_pipe[1]);
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];

  int exec_error = 0;
  const ssize_t got = ::read(exec_error_pipe[0], &exec_error, sizeof exec_error);
  ::close(exec_error_pipe[0]);
  if (got == sizeof exec_error) {
    reap(false);
    close_fd(out_fd_);
    close_fd(err_fd_);
    throw std::runtime_error("cannot run `" + join(argv) + "`: " + std::strerror(exec_error));
  }
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    kill_group(SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  close_fd(out_fd_);
  close_fd(err_fd_);
}

bool ChildProcess::pump(Clock::time_point deadline) {
  pollfd fds[2];
  std::string* sinks[2];
  int* owners[2];
  nfds_t count = 0;
  for (auto [fd, sink] : {std::pair{&out_fd_, &out_}, std::pair{&err_fd_, &err_}}) {
    if (*fd < 0) continue;
    fds[count] = {*fd, POLLIN, 0};
    sinks[count] = sink;
    owners[count] = fd;
    ++count;
  }
  if (count == 0) return false;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  const int ready = ::poll(fds, count, static_cast<int>(std::max<std::int64_t>(0, left.count())));
  if (ready < 0 && errno != EINTR)
    throw std::runtime_error(std::string("poll on child pipes: ") + std::strerror(errno));
  for (nfds_t i = 0; ready > 0 && i < count; ++i) {
    if (fds[i].revents == 0) continue;
    char buffer[8192];
    const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
    if (got > 0) {
      sinks[i]->append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      close_fd(*owners[i]);
    }
  }
  return out_fd_ >= 0 || err_fd_ >= 0;
}

void ChildProcess::kill_group(int signal_number) {
  if (pid_ > 0) ::killpg(pid_, signal_number);
}

ProcessResult ChildProcess::reap(bool timed_out) {
  if (!reaped_) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exit_code_ = exit_code_of(status);
    reaped_ = true;
  }
  return {exit_code_, timed_out, out_, err_};
}

bool ChildProcess::read_until(const std::function<bool(const std::string& out)>& done,
                              std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done(out_)) {
    if (Clock::now() >= deadline || !pump(deadline)) return done(out_);
  }
  return true;
}

ProcessResult ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    const bool open = pump(std::min(deadline, Clock::now() + kExitCheckInterval));
    if (!reaped_) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = exit_code_of(status);
        reaped_ = true;
      }
    }
    if (reaped_ && !open) return reap(false);
  }
  // Past the deadline: the child (or a grandchild holding its pipes) is still running.
  kill_group(SIGKILL);
  const ProcessResult killed = reap(true);
  const auto drain_deadline = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < drain_deadline && pump(drain_deadline)) {
  }
  return {killed.exit_code, true, out_, err_};
}

ProcessResult ChildProcess::stop(std::chrono::milliseconds grace) {
  if (!reaped_) kill_group(SIGTERM);
  return wait(grace);
}

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  ChildProcess child(argv);
  return child.wait(timeout);
}

}  // namespace tessel::testing
