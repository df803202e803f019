#include "noderuntime/launcher/supervisor.h"

#include <poll.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "noderuntime/launcher/blame.h"
#include "noderuntime/launcher/stage_event.h"

namespace tessel::launcher {
namespace {

using Clock = std::chrono::steady_clock;

class Supervisor {
 public:
  Supervisor(StageProcesses& processes, ProgressServer& progress, StopSignals& signals,
             ProgressTracker& tracker, const SupervisorOptions& options)
      : processes_(processes),
        progress_(progress),
        signals_(signals),
        tracker_(tracker),
        options_(options),
        errors_(processes.children().size()),
        killed_(processes.children().size(), false),
        unresponsive_(processes.children().size(), false),
        order_(processes.children().size(), -1) {}

  SupervisedRun run() {
    const Clock::time_point start = Clock::now();
    while (!processes_.all_reaped()) {
      wait_for_news(std::chrono::milliseconds(100));
      take_events();
      for (int signal : signals_.take()) {
        if (signal == SIGINT || signal == SIGTERM) on_user_signal(signal);
      }
      // A process delivers its events before it exits (it flushes its reporter): take what
      // arrived before it was reaped.
      take_events();
      on_ended(processes_.reap());
      if (stopping_) kill_stopped();
      if (stopping_ && !killed_all_ && Clock::now() >= kill_at_) {
        note("the stage processes did not stop within the grace period: killing them");
        for (const StageChild& child : processes_.children()) {
          if (!child.exit) unresponsive_[child.rank] = true;
        }
        kill_all();
      }
    }
    end_progress_line();
    SupervisedRun result;
    result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    if (!failure_.empty() || !failed_.empty()) {
      result.status = RunStatus::kFailed;
      result.exit_code = 1;
      result.message = failure_.empty() ? blame() : failure_;
    } else if (user_signal_) {
      result.status = RunStatus::kStopped;
      result.exit_code = 128 + user_signal_;
      result.message = std::string("by ") + (user_signal_ == SIGINT ? "SIGINT" : "SIGTERM");
    }
    return result;
  }

 private:
  // Until an event or a signal arrives, or the timeout passes (a process may have ended).
  void wait_for_news(std::chrono::milliseconds timeout) {
    pollfd fds[2] = {{progress_.wake_fd(), POLLIN, 0}, {signals_.fd(), POLLIN, 0}};
    ::poll(fds, 2, static_cast<int>(timeout.count()));  // EINTR: the caller loops
  }

  void take_events() {
    for (const pb::StageEvent& event : progress_.take()) on_event(event);
  }

  void on_event(const pb::StageEvent& event) {
    try {
      const TakenEvent taken = take_stage_event(tracker_, static_cast<int>(errors_.size()), event);
      if (taken.step_done) show(*taken.step_done);
      if (taken.started && options_.on_started) {
        end_progress_line();
        options_.on_started(taken.rank);
      }
      if (taken.error) errors_[taken.rank] = *taken.error;
    } catch (const StageEventError& e) {
      fail(e.what());
    } catch (const std::exception& e) {
      fail(label(event.tasklet().rank()) + ": " + e.what());
    }
  }

  void on_user_signal(int signal) {
    if (!stopping_) {
      user_signal_ = signal;
      note("stopping: every stage process finishes its step, then exits (again to kill them)");
      stop();
    } else if (!killed_all_) {
      note("killing the stage processes");
      kill_all();
    }
  }

  void on_ended(const std::vector<int>& ranks) {
    for (int rank : ranks) {
      const StageExit& exit = *processes_.children()[rank].exit;
      if (exit.ok() || (stopping_ && stopped_by_us(rank, exit))) continue;
      // Not necessarily the one at fault: a killed process can be reaped after the peer that
      // saw its connection close (blame() sorts it out).
      order_[rank] = static_cast<int>(ended_badly_.size());
      ended_badly_.push_back(rank);
      if (!stopping_) failed_.push_back(rank);
    }
    if (!failed_.empty() && !stopping_) {
      note("a stage process ended unexpectedly: stopping the others");
      stop();
    }
  }

  void fail(const std::string& why) {
    if (stopping_) return;
    failure_ = why;
    stop();
  }

  void stop() {
    stopping_ = true;
    kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(options_.grace_s));
    processes_.signal_running(SIGTERM);
    kill_stopped();
  }

  // A process stopped by a signal (SIGSTOP) cannot act on SIGTERM until it continues, and its
  // peers are going: it is killed at once rather than after the grace period.
  void kill_stopped() {
    for (const StageChild& child : processes_.children()) {
      if (child.exit || !child.stopped_by || killed_[child.rank]) continue;
      note(label(child.rank) + " is stopped by " + signal_name(*child.stopped_by) +
           " and cannot stop by itself: killing it");
      killed_[child.rank] = true;
      processes_.signal_rank(child.rank, SIGKILL);
    }
  }

  void kill_all() {
    killed_all_ = true;
    for (const StageChild& child : processes_.children()) {
      if (!child.exit) killed_[child.rank] = true;
    }
    processes_.signal_running(SIGKILL);
  }

  // How a process ends when the launcher stops it: its stop handler's status after SIGTERM,
  // or killed by SIGTERM (a second one) or by the launcher's SIGKILL.
  bool stopped_by_us(int rank, const StageExit& exit) const {
    if (!exit.signaled) return exit.code == 128 + SIGTERM;
    return exit.code == SIGTERM || (exit.code == SIGKILL && killed_[rank]);
  }

  // The process at fault (blame.h).
  std::string blame() const {
    std::vector<RankEnd> ends;
    for (const StageChild& child : processes_.children()) {
      RankEnd end;
      end.rank = child.rank;
      end.label = child.label;
      end.pid = child.pid;
      end.log_path = child.log_path;
      end.exit = child.exit;
      end.order = order_[child.rank];
      end.ended_badly = end.order >= 0;
      end.error = errors_[child.rank];
      // A process that failed before it could report (or whose report was lost) still said
      // why on its standard error.
      if (!end.error && end.ended_badly) end.error = error_line_of_log(child.log_path);
      end.stopped_by = child.stopped_by;
      end.unresponsive = unresponsive_[child.rank];
      ends.push_back(std::move(end));
    }
    return assign_blame(ends).message;
  }

  std::string label(int rank) const {
    return processes_.children()[rank].label + " (rank " + std::to_string(rank) + ")";
  }

  void show(const progress::StepMetrics& summary) {
    if (!options_.out) return;
    const std::string line = tracker_.progress_line(summary);
    if (options_.tty) {
      std::fprintf(options_.out, "\r\033[K%s", line.c_str());
      line_open_ = true;
    } else {
      std::fprintf(options_.out, "%s\n", line.c_str());
    }
    std::fflush(options_.out);
  }

  void note(const std::string& text) {
    if (!options_.out) return;
    end_progress_line();
    std::fprintf(options_.out, "tessel local: %s\n", text.c_str());
    std::fflush(options_.out);
  }

  void end_progress_line() {
    if (line_open_ && options_.out) std::fputc('\n', options_.out);
    line_open_ = false;
  }

  StageProcesses& processes_;
  ProgressServer& progress_;
  StopSignals& signals_;
  ProgressTracker& tracker_;
  const SupervisorOptions& options_;
  std::vector<std::optional<std::string>> errors_;  // per rank, its error event's message
  std::vector<bool> killed_;                        // per rank, the launcher sent it SIGKILL
  std::vector<bool> unresponsive_;  // per rank, it did not stop within the grace period
  std::vector<int> order_;          // per rank, its place in ended_badly_, or -1
  std::vector<int> failed_;         // ranks that ended badly before anyone was stopped
  std::vector<int> ended_badly_;  // ranks that ended badly, not by the launcher's signals, in order
  std::string failure_;           // a failure of the launcher's own (an event it cannot use)
  int user_signal_ = 0;
  bool stopping_ = false;
  bool killed_all_ = false;
  bool line_open_ = false;
  Clock::time_point kill_at_;
};

}  // namespace

SupervisedRun supervise(StageProcesses& processes, ProgressServer& progress, StopSignals& signals,
                        ProgressTracker& tracker, const SupervisorOptions& options) {
  return Supervisor(processes, progress, signals, tracker, options).run();
}

}  // namespace tessel::launcher
