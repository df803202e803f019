// tessel-stage: one tasklet (a pipeline stage of one data-parallel replica) of a training job.
//   tessel-stage --job job.json --rank R [--no-overlap]
// --no-overlap overrides the job's schedule.overlap (for benchmarks of the overlap itself).
// job.json is described in job_spec.h, the progress events and exit status in stage_process.h.
// Progress goes over gRPC to the job's progress.address, or as JSON lines to stdout.
#include <atomic>
#include <csignal>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>

#include "noderuntime/stage/grpc_progress_reporter.h"
#include "noderuntime/stage/job_spec.h"
#include "noderuntime/stage/stage_process.h"

namespace {

std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int signal) { g_stop_signal.store(signal); }

// The first SIGTERM or SIGINT asks for a clean stop after the current step; the handler resets
// itself, so a second one terminates at once.
void install_stop_handlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // A write past RLIMIT_FSIZE then fails with EFBIG, and the error names the file (a checkpoint,
  // a trace) and "File too large", instead of the process dying of SIGXFSZ without a word.
  std::signal(SIGXFSZ, SIG_IGN);
}

constexpr const char* kUsage =
    "usage: tessel-stage --job JOB.json --rank R [--no-overlap]\n"
    "  Runs rank R of the training job described by JOB.json. Progress goes to the job's\n"
    "  progress.address over gRPC, or as one JSON line per event on stdout when it has none.\n"
    "  SIGTERM/SIGINT stop every rank after the current step.\n"
    "  --no-overlap: wait for every communication at once, all-reduce after the backward\n"
    "  (every rank of the job must be given the same choice).\n";

}  // namespace

int main(int argc, char** argv) {
  static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free int");
  std::string job_path;
  std::string rank_text;
  bool no_overlap = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--no-overlap") {
      no_overlap = true;
      continue;
    }
    if ((arg == "--job" || arg == "--rank") && i + 1 < argc) {
      (arg == "--job" ? job_path : rank_text) = argv[++i];
      continue;
    }
    std::cerr << "tessel-stage: unexpected argument '" << arg << "'\n" << kUsage;
    return 2;
  }
  if (job_path.empty() || rank_text.empty()) {
    std::cerr << "tessel-stage: --job and --rank are required\n" << kUsage;
    return 2;
  }
  int rank = -1;
  try {
    size_t used = 0;
    rank = std::stoi(rank_text, &used);
    if (used != rank_text.size()) rank = -1;
  } catch (const std::exception&) {
    rank = -1;
  }
  if (rank < 0) {
    std::cerr << "tessel-stage: --rank: expected a non-negative integer, got '" << rank_text
              << "'\n";
    return 2;
  }
  install_stop_handlers();
  tessel::stage::JobSpec job;
  try {
    job = tessel::stage::load_job_spec(job_path);
    if (no_overlap) job.training.overlap = false;
  } catch (const std::exception& e) {
    std::cerr << "tessel-stage: " << e.what() << '\n';
    return 2;
  }
  std::random_device entropy;
  const uint64_t incarnation = uint64_t{entropy()} << 32 | entropy();
  tessel::stage::pb::Tasklet tasklet = tessel::stage::tasklet_of(job, rank, incarnation);
  std::unique_ptr<tessel::stage::ProgressReporter> progress;
  if (job.progress_address.empty()) {
    progress = std::make_unique<tessel::stage::JsonLinesReporter>(std::move(tasklet), std::cout);
  } else {
    progress = std::make_unique<tessel::stage::GrpcProgressReporter>(std::move(tasklet),
                                                                     job.progress_address);
  }
  const int status =
      tessel::stage::run_stage_process(job, rank, *progress, std::cerr, g_stop_signal);
  if (!progress->flush(std::chrono::seconds(10))) {
    std::cerr << "tessel-stage rank " << rank << ": progress: the last events did not reach "
              << job.progress_address << " within 10 s\n";
  }
  return status;
}
