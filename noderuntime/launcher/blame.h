// Which tasklet a failed job is blamed on, and the sentence that says so.
//
// When one stage process fails, its peers fail too: they time out waiting for it, or see its
// connection close. The first process to end is therefore often a victim, not the cause. The
// blame goes, in this order, to:
//   1. a process killed by a signal the launcher did not send (SIGKILL from the OOM killer,
//      SIGSEGV, ...);
//   2. a process that ended badly without saying why (no error event, no error line in its log);
//   3. a process whose error is its own: not a complaint about a peer (a bad checkpoint, a file it
//      cannot write, training that diverged), and that names no other tasklet; then the process
//      the others' errors name as at fault ("not starting: stage 1 replica 0 (rank 1) could not
//      load its checkpoint");
//   4. the process the others timed out on that did not complain about anyone itself: it stopped
//      answering (the one named by the most complainers; the lowest rank on a tie);
//   5. a process that was stopped (SIGSTOP) or did not stop within the grace period: it stopped
//      answering even where no peer got to time out on it;
//   6. the process most named by timeouts, then by closed connections (complainers among them);
//   7. the first process with an error of its own, then the first that ended badly.
// A complaint about a peer is an error that names another rank the way the transport names its
// peers, "rank 3 (127.0.0.1:40123, stage 1 replica 1): ...", or the way the stage runtime names
// another tasklet, "stage 1 replica 1 (rank 3)", together with a timeout ("no data
// for", "no progress sending for", "timed out") or a lost connection ("connection closed",
// "communicator closed", "reset by the peer").
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "noderuntime/launcher/stage_processes.h"

namespace tessel::launcher {

struct PeerComplaint {
  enum class Kind { kTimeout, kClosed };
  Kind kind = Kind::kTimeout;
  std::vector<int> ranks;  // the other ranks the message names, in order, each once
};

// What `message` (an error of rank `own_rank` in a job of `world` ranks) says about its peers;
// nullopt when it is not a complaint about another rank.
std::optional<PeerComplaint> peer_complaint(const std::string& message, int own_rank, int world);

// The other ranks (in [0, world), not own_rank) that `message` names, in order, each once:
// "rank 3 (..." and "(rank 3)".
std::vector<int> ranks_named(const std::string& message, int own_rank, int world);

// How one rank ended, as the supervisor saw it.
struct RankEnd {
  int rank = 0;
  std::string label;  // "stage 1 replica 0"
  pid_t pid = -1;
  std::string log_path;
  std::optional<StageExit> exit;
  bool ended_badly = false;          // failed, other than by the launcher's own signals
  int order = -1;                    // among those that ended badly, the order they were seen
  std::optional<std::string> error;  // its error event's message, else its log's error line
  std::optional<int> stopped_by;     // it was stopped (SIGSTOP, SIGTSTP, ...) when it ended
  bool unresponsive = false;         // did not stop within the grace period: killed
};

struct Blame {
  int rank = 0;
  std::string message;  // "stage 1 replica 0 (rank 1) (pid 123) stopped answering: ..."
};

// The rank at fault among `ranks` (index = rank) and why. At least one must have ended badly.
Blame assign_blame(const std::vector<RankEnd>& ranks);

// The error line of a stage process's log: the last line that says "error" (else the last
// non-empty line) of its last 64 KiB, at most 1000 characters; nullopt when there is none or the
// log cannot be read.
std::optional<std::string> error_line_of_log(const std::string& log_path);

}  // namespace tessel::launcher
