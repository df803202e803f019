#include "tests/support/process_kubelet_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

namespace tessel::testing {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

// strerror, lower case first letter, as Go prints syscall errors.
std::string error_text(int error) {
  std::string text = std::strerror(error);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// posix_spawn's attributes and file actions, released on every path.
class SpawnSetup {
 public:
  SpawnSetup() {
    ::posix_spawnattr_init(&attributes_);
    ::posix_spawn_file_actions_init(&actions_);
  }
  ~SpawnSetup() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attributes_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  posix_spawnattr_t* attributes() { return &attributes_; }
  posix_spawn_file_actions_t* actions() { return &actions_; }

 private:
  posix_spawnattr_t attributes_;
  posix_spawn_file_actions_t actions_;
};

void check(int result, const char* what) {
  if (result != 0) {
    throw ProcessStartError(std::string("failed to prepare the container process: ") + what + ": " +
                            error_text(result));
  }
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// posix_spawn(), run on a thread of its own that entered the network namespace `netns` first
// when it is not empty: the child starts in the namespaces of the thread that spawns it, and
// the kubelet's own threads stay where they are.
int spawn_in(const std::string& netns, pid_t* pid, const char* path,
             const posix_spawn_file_actions_t* actions, const posix_spawnattr_t* attributes,
             char* const argv[], char* const envp[]) {
  if (netns.empty()) return ::posix_spawn(pid, path, actions, attributes, argv, envp);
  const std::string netns_path = network_namespace_path(netns);
  const int fd = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw ProcessStartError("failed to enter the network namespace " + netns + ": open " +
                            netns_path + ": " + error_text(errno));
  }
  int setns_error = 0;
  int result = 0;
  std::thread spawner([&] {
    if (::setns(fd, CLONE_NEWNET) != 0) {
      setns_error = errno;
      return;
    }
    result = ::posix_spawn(pid, path, actions, attributes, argv, envp);
  });
  spawner.join();
  ::close(fd);
  if (setns_error != 0) {
    throw ProcessStartError("failed to enter the network namespace " + netns + ": setns " +
                            netns_path + ": " + error_text(setns_error));
  }
  return result;
}

}  // namespace

std::string network_namespace_path(const std::string& name) { return "/var/run/netns/" + name; }

std::string find_executable(const std::string& command, const std::string& path_variable) {
  if (command.empty()) throw ProcessStartError("exec: no command specified");
  if (command.find('/') != std::string::npos) return command;
  std::string_view rest = path_variable;
  while (true) {
    const std::size_t colon = rest.find(':');
    std::string directory(rest.substr(0, colon));
    if (directory.empty()) directory = ".";  // an empty entry means the working directory
    const std::string candidate = directory + "/" + command;
    if (is_executable_file(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  throw ProcessStartError("exec: \"" + command + "\": executable file not found in $PATH");
}

ContainerProcess::ContainerProcess(const ProcessSpec& spec, std::function<void()> on_exit)
    : on_exit_(std::move(on_exit)) {
  const int log_fd = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    throw ProcessStartError("failed to open the container log " + spec.log_path + ": " +
                            error_text(errno));
  }
  SpawnSetup setup;
  try {
    check(::posix_spawn_file_actions_addopen(setup.actions(), 0, "/dev/null", O_RDONLY, 0),
          "stdin");
    check(::posix_spawn_file_actions_adddup2(setup.actions(), log_fd, 1), "stdout");
    check(::posix_spawn_file_actions_adddup2(setup.actions(), log_fd, 2), "stderr");
    // Whatever the kubelet's threads have open (sockets, a listening port) stays with it.
    check(::posix_spawn_file_actions_addclosefrom_np(setup.actions(), 3), "closefrom");
    check(::posix_spawn_file_actions_addchdir_np(setup.actions(), spec.working_directory.c_str()),
          "working directory");
    check(::posix_spawnattr_setpgroup(setup.attributes(), 0), "process group");
    sigset_t signals;
    sigemptyset(&signals);
    check(::posix_spawnattr_setsigmask(setup.attributes(), &signals), "signal mask");
    sigfillset(&signals);
    check(::posix_spawnattr_setsigdefault(setup.attributes(), &signals), "signal defaults");
    check(::posix_spawnattr_setflags(setup.attributes(), POSIX_SPAWN_SETPGROUP |
                                                             POSIX_SPAWN_SETSIGMASK |
                                                             POSIX_SPAWN_SETSIGDEF),
          "flags");
  } catch (...) {
    ::close(log_fd);
    throw;
  }
  std::vector<std::string> arguments = spec.arguments;
  std::vector<std::string> environment = spec.environment;
  std::vector<char*> argv = c_strings(arguments);
  std::vector<char*> envp = c_strings(environment);
  int result = 0;
  try {
    result = spawn_in(spec.network_namespace, &pid_, spec.executable.c_str(), setup.actions(),
                      setup.attributes(), argv.data(), envp.data());
  } catch (...) {
    ::close(log_fd);
    throw;
  }
  ::close(log_fd);
  if (result != 0) {
    throw ProcessStartError("exec: \"" + spec.executable + "\": " + error_text(result));
  }
  started_at_ = std::chrono::system_clock::now();
  waiter_ = std::thread([this] { wait_for_exit(); });
}

ContainerProcess::~ContainerProcess() {
  signal_group(SIGKILL);
  if (waiter_.joinable()) waiter_.join();
}

void ContainerProcess::signal_group(int signal) {
  std::lock_guard lock(mutex_);
  if (!exit_) ::kill(-pid_, signal);
}

std::optional<ProcessExit> ContainerProcess::exit_status() const {
  std::lock_guard lock(mutex_);
  return exit_;
}

void ContainerProcess::wait_for_exit() {
  // Wait without reaping: the zombie keeps the process group id reserved while the rest of the
  // group is killed.
  siginfo_t info{};
  int waited;
  do {
    waited = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT);
  } while (waited != 0 && errno == EINTR);
  ::kill(-pid_, SIGKILL);
  {
    std::lock_guard lock(mutex_);
    int status = 0;
    pid_t reaped;
    do {
      reaped = ::waitpid(pid_, &status, 0);
    } while (reaped < 0 && errno == EINTR);
    ProcessExit exit;
    exit.finished_at = std::chrono::system_clock::now();
    if (reaped != pid_) {
      exit.exit_code = 255;
      exit.status_unknown = true;
    } else if (WIFSIGNALED(status)) {
      exit.signal = WTERMSIG(status);
      exit.exit_code = 128 + exit.signal;
    } else {
      exit.exit_code = WEXITSTATUS(status);
    }
    exit_ = exit;
  }
  if (on_exit_) on_exit_();
}

}  // namespace tessel::testing
