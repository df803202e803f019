// One container of the process kubelet as a local process: started with posix_spawn in a
// process group of its own (from a thread that entered the node's network namespace first,
// when it has one: the child starts in the namespace of the thread that spawns it), stdin from
// /dev/null, stdout and stderr appended to a log file, default signal handling, and no file
// descriptor of the kubelet inherited. A thread of its own waits for it. When the main process
// ends, whatever is left of its group is killed, as a container runtime tears down a container
// whose init process exited.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tessel::testing {

struct ProcessSpec {
  std::string executable;                // a path with a '/' (relative ones from working_directory)
  std::vector<std::string> arguments;    // argv, argv[0] included
  std::vector<std::string> environment;  // "NAME=value": the whole environment
  std::string working_directory;
  std::string log_path;  // stdout and stderr, appended
  // A network namespace (its name under /var/run/netns) the process runs in; empty: the
  // kubelet's own.
  std::string network_namespace;
};

// "/var/run/netns/<name>": where `ip netns add` keeps a network namespace.
std::string network_namespace_path(const std::string& name);

// The process could not be started. what() reads like a container runtime's message:
// `exec: "train": executable file not found in $PATH`.
class ProcessStartError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The absolute path `command` runs: itself when it holds a '/', else the first executable file
// of that name in the directories of `path_variable` (colon-separated, as execvp searches).
// Throws ProcessStartError when there is none.
std::string find_executable(const std::string& command, const std::string& path_variable);

struct ProcessExit {
  // The exit status; 128 + the signal when a signal ended it (as container runtimes report);
  // 255 when the status could not be read (someone else reaped the process).
  int exit_code = 0;
  int signal = 0;  // the signal that ended it; 0 when it exited
  bool status_unknown = false;
  std::chrono::system_clock::time_point finished_at;
};

class ContainerProcess {
 public:
  // Starts the process. on_exit runs on the waiting thread once the process has ended and been
  // reaped; it must not destroy this object. Throws ProcessStartError.
  ContainerProcess(const ProcessSpec& spec, std::function<void()> on_exit);
  // Kills the group (SIGKILL) if it still runs, and waits until the process is reaped.
  ~ContainerProcess();
  ContainerProcess(const ContainerProcess&) = delete;
  ContainerProcess& operator=(const ContainerProcess&) = delete;

  pid_t pid() const { return pid_; }
  std::chrono::system_clock::time_point started_at() const { return started_at_; }

  // Sends `signal` to the whole process group; nothing once the process has been reaped.
  void signal_group(int signal);
  // The exit, once the process has ended and been reaped.
  std::optional<ProcessExit> exit_status() const;

 private:
  void wait_for_exit();

  pid_t pid_ = -1;
  std::chrono::system_clock::time_point started_at_;
  std::function<void()> on_exit_;
  // Guards exit_: the group is signalled only while the leader is not reaped, so its id cannot
  // have been given to another process.
  mutable std::mutex mutex_;
  std::optional<ProcessExit> exit_;
  std::thread waiter_;
};

}  // namespace tessel::testing
