// A child process with its stdout and stderr captured and every wait bounded, so that a test
// driving a command-line tool (kubectl) can never hang: the child runs in a process group of
// its own, and whatever is still running when a deadline passes or the object goes away is
// killed with its whole group (kubectl's dispatcher runs the real kubectl as its child).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessel::testing {

struct ProcessResult {
  // The exit status; 128 + signal number when a signal ended the child.
  int exit_code = -1;
  bool timed_out = false;  // the deadline passed and the child was killed
  std::string out;
  std::string err;
};

// Where `program` would be found on $PATH (as execvp searches); nullopt when it is not there.
std::optional<std::string> find_on_path(const std::string& program);

class ChildProcess {
 public:
  // Starts argv[0] (searched on $PATH unless it holds a '/') with the arguments; stdin reads
  // from /dev/null. Throws std::runtime_error naming the command when it cannot be started.
  explicit ChildProcess(const std::vector<std::string>& argv);
  // Kills the child's process group if it still runs, and reaps it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Collects output until `done(stdout so far)` holds (true), or the child has exited or the
  // timeout passed without it (false).
  bool read_until(const std::function<bool(const std::string& out)>& done,
                  std::chrono::milliseconds timeout);

  // Waits for the child to exit, collecting all its output; when it has not exited within the
  // timeout its group is killed and the result says timed_out.
  ProcessResult wait(std::chrono::milliseconds timeout);

  // Asks the child to end (SIGTERM to its group), then waits as wait() does, killing it when it
  // takes longer than `grace`.
  ProcessResult stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  // Reads what is available into out_/err_, waiting at most until deadline; false when both
  // pipes are closed.
  bool pump(std::chrono::steady_clock::time_point deadline);
  void kill_group(int signal_number);
  ProcessResult reap(bool timed_out);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  bool reaped_ = false;
  int exit_code_ = -1;
};

// Runs argv to completion within timeout (see ChildProcess::wait).
ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace tessel::testing
