// The stage processes of a local job: one tessel-stage per rank, started with fork/exec in a
// process group of their own (so a terminal's Ctrl-C reaches the launcher alone, which stops
// them in order), stdin from /dev/null, stdout and stderr into a log file per rank. Their
// progress comes over gRPC (progress_server.h). Each is killed by the kernel if the launcher's
// thread that started it dies (PR_SET_PDEATHSIG), so none outlives a launcher that is killed
// itself. The destructor kills and reaps whatever still runs.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace tessel::launcher {

struct StageExit {
  bool signaled = false;  // killed by a signal (code is the signal) or exited (code)
  int code = 0;
  bool ok() const { return !signaled && code == 0; }
  int shell_status() const { return signaled ? 128 + code : code; }
  std::string describe() const;  // "exited with status 1", "was killed by SIGKILL"
};

// "SIGKILL", or "signal 70" for one without a name.
std::string signal_name(int signal);

struct StageChild {
  int rank = 0;
  std::string label;  // "stage 1 replica 0"
  pid_t pid = -1;
  std::string log_path;
  std::optional<StageExit> exit;
  std::optional<int> stopped_by;  // the signal that stopped it (SIGSTOP...) until it continues
};

class StageProcesses {
 public:
  // Starts `binary --job job_path --rank r [extra_args...]` for every label (rank r = its
  // index), behind rank r's command prefix when it has one (command_prefixes[r], e.g. {"ip",
  // "netns", "exec", "site-a"}: its first word is looked up in PATH, and it must exec the rest
  // in the same process, so that signals and the exit status are the stage process's). Throws
  // std::runtime_error naming the rank when one cannot be started (the others are killed), or
  // std::invalid_argument when command_prefixes is neither empty nor one per label.
  StageProcesses(const std::string& binary, const std::string& job_path,
                 const std::vector<std::string>& labels, const std::string& log_dir,
                 const std::vector<std::string>& extra_args = {},
                 const std::vector<std::vector<std::string>>& command_prefixes = {});
  ~StageProcesses();
  StageProcesses(const StageProcesses&) = delete;
  StageProcesses& operator=(const StageProcesses&) = delete;

  // Collects the processes that have ended (without blocking); returns their ranks. Also notes
  // which are stopped by a signal (StageChild::stopped_by) and which continued.
  std::vector<int> reap();
  // Sends the signal to every process not yet reaped.
  void signal_running(int signal);
  // Sends the signal to one rank's process, when it has not been reaped.
  void signal_rank(int rank, int signal);
  bool all_reaped() const;
  const std::vector<StageChild>& children() const { return children_; }

 private:
  void start(const std::string& binary, const std::string& job_path,
             const std::vector<std::string>& extra_args, const std::vector<std::string>& prefix,
             StageChild& child);
  void kill_and_reap_all();

  std::vector<StageChild> children_;
  pid_t group_ = 0;
};

}  // namespace tessel::launcher
