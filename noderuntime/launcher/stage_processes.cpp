#include "noderuntime/launcher/stage_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace tessel::launcher {
namespace {

// In the child: reports errno on the status pipe and exits.
[[noreturn]] void child_failed(int status_fd) {
  const int error = errno;
  [[maybe_unused]] const ssize_t n = write(status_fd, &error, sizeof error);
  _exit(127);
}

// In the child between fork and exec: only async-signal-safe calls. Reports a failure to exec
// as errno on the status pipe, which closes unread (O_CLOEXEC) when the exec succeeds.
// A prefix's program is looked up in PATH; the stage binary itself is run as given.
[[noreturn]] void exec_child(const char* program, bool search_path, char* const argv[],
                             const char* log_path, pid_t group, pid_t parent, int status_fd) {
  const auto fail = [status_fd] { child_failed(status_fd); };
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail();
  if (getppid() != parent) _exit(127);  // the launcher died before prctl
  if (setpgid(0, group) != 0) fail();
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (null_fd < 0 || log_fd < 0) fail();
  if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(log_fd, STDOUT_FILENO) < 0 ||
      dup2(log_fd, STDERR_FILENO) < 0) {
    fail();
  }
  // Signals the launcher ignores or blocks must not stay so across exec.
  struct sigaction default_action;
  std::memset(&default_action, 0, sizeof default_action);
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (search_path) {
    execvp(program, argv);
  } else {
    execv(program, argv);
  }
  child_failed(status_fd);
}

}  // namespace

std::string signal_name(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation ? "SIG" + std::string(abbreviation) : "signal " + std::to_string(signal);
}

std::string StageExit::describe() const {
  return signaled ? "was killed by " + signal_name(code)
                  : "exited with status " + std::to_string(code);
}

StageProcesses::StageProcesses(const std::string& binary, const std::string& job_path,
                               const std::vector<std::string>& labels, const std::string& log_dir,
                               const std::vector<std::string>& extra_args,
                               const std::vector<std::vector<std::string>>& command_prefixes) {
  if (!command_prefixes.empty() && command_prefixes.size() != labels.size()) {
    throw std::invalid_argument("stage processes: " + std::to_string(command_prefixes.size()) +
                                " command prefixes for " + std::to_string(labels.size()) +
                                " ranks (one per rank, or none)");
  }
  children_.resize(labels.size());
  try {
    for (size_t r = 0; r < labels.size(); ++r) {
      StageChild& child = children_[r];
      child.rank = static_cast<int>(r);
      child.label = labels[r];
      child.log_path =
          (std::filesystem::path(log_dir) / ("rank-" + std::to_string(r) + ".log")).string();
      start(binary, job_path, extra_args,
            command_prefixes.empty() ? std::vector<std::string>{} : command_prefixes[r], child);
    }
  } catch (...) {
    kill_and_reap_all();
    throw;
  }
}

StageProcesses::~StageProcesses() { kill_and_reap_all(); }

void StageProcesses::start(const std::string& binary, const std::string& job_path,
                           const std::vector<std::string>& extra_args,
                           const std::vector<std::string>& prefix, StageChild& child) {
  int status[2];
  if (pipe2(status, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe: " + std::string(strerror(errno)));
  }
  const std::string rank = std::to_string(child.rank);
  std::vector<std::string> args = prefix;
  args.insert(args.end(), {binary, "--job", job_path, "--rank", rank});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {status[0], status[1]}) close(fd);
    throw std::runtime_error("fork: " + std::string(strerror(errno)));
  }
  if (pid == 0) {
    exec_child(args.front().c_str(), !prefix.empty(), argv.data(), child.log_path.c_str(), group_,
               parent, status[1]);
  }
  if (group_ == 0) group_ = pid;
  setpgid(pid, group_);  // also here: whichever of parent and child runs first sets it
  close(status[1]);
  child.pid = pid;
  int error = 0;
  ssize_t n;
  while ((n = read(status[0], &error, sizeof error)) < 0 && errno == EINTR) {
  }
  close(status[0]);
  if (n > 0) {
    throw std::runtime_error("rank " + rank + " (" + child.label + "): cannot start " +
                             args.front() + ": " + strerror(error));
  }
}

std::vector<int> StageProcesses::reap() {
  std::vector<int> ended;
  for (StageChild& child : children_) {
    // Every change of state it has had since the last call: stopped, continued, ended.
    while (child.pid > 0 && !child.exit) {
      int status = 0;
      const pid_t done = waitpid(child.pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
      if (done != child.pid) break;
      if (WIFSTOPPED(status)) {
        child.stopped_by = WSTOPSIG(status);
      } else if (WIFCONTINUED(status)) {
        child.stopped_by.reset();
      } else {
        child.exit = WIFSIGNALED(status) ? StageExit{true, WTERMSIG(status)}
                                         : StageExit{false, WEXITSTATUS(status)};
        ended.push_back(child.rank);
      }
    }
  }
  return ended;
}

void StageProcesses::signal_running(int signal) {
  for (const StageChild& child : children_) {
    if (child.pid > 0 && !child.exit) kill(child.pid, signal);  // a zombie keeps its pid
  }
}

void StageProcesses::signal_rank(int rank, int signal) {
  const StageChild& child = children_.at(static_cast<size_t>(rank));
  if (child.pid > 0 && !child.exit) kill(child.pid, signal);
}

bool StageProcesses::all_reaped() const {
  for (const StageChild& child : children_) {
    if (child.pid > 0 && !child.exit) return false;
  }
  return true;
}

void StageProcesses::kill_and_reap_all() {
  for (StageChild& child : children_) {
    if (child.pid > 0 && !child.exit) {
      kill(child.pid, SIGKILL);
      int status = 0;
      while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
      }
      child.exit = StageExit{true, SIGKILL};
    }
  }
}

}  // namespace tessel::launcher
