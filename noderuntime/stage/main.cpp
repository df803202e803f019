// tessel-stage: one tasklet (a pipeline stage of one data-parallel replica) of a training job.
//   tessel-stage --job job.json --rank R [--device cpu|cuda|auto] [--no-overlap]
//                [--termination-log PATH]
// --device chooses the backend of its chunks (device_choice.h; auto by default).
// --no-overlap overrides the job's schedule.overlap (for benchmarks of the overlap itself).
// --termination-log: the pod's terminationMessagePath (the operator gives it): how the process
// ended, which the kubelet copies into the pod's status (ProgressReporter::termination_message).
// job.json is described in job_spec.h, the progress events and exit status in stage_process.h.
// Progress goes over gRPC to the job's progress.address, or as JSON lines to stdout.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "noderuntime/stage/device_choice.h"
#include "noderuntime/stage/grpc_progress_reporter.h"
#include "noderuntime/stage/job_spec.h"
#include "noderuntime/stage/stage_process.h"

#ifdef TESSEL_STAGE_CUDA
#include "kernels/cuda/device.h"
#include "noderuntime/stage/cuda/gpt_chunk_cuda.h"
#endif
#ifdef TESSEL_STAGE_NCCL
#include "noderuntime/stage/cuda/nccl_islands.h"
#endif

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
    "usage: tessel-stage --job JOB.json --rank R [--device cpu|cuda|auto] [--no-overlap]\n"
    "                    [--termination-log PATH]\n"
    "  Runs rank R of the training job described by JOB.json. Progress goes to the job's\n"
    "  progress.address over gRPC, or as one JSON line per event on stdout when it has none.\n"
    "  SIGTERM/SIGINT stop every rank after the current step.\n"
    "  --device: cpu (fp32), cuda (bf16 mixed precision on the GPU), or auto (the default:\n"
    "  cuda for a bf16 job when a GPU is usable, else cpu). The choice is said on stderr.\n"
    "  --no-overlap: wait for every communication at once, all-reduce after the backward\n"
    "  (every rank of the job must be given the same choice).\n"
    "  --termination-log: at exit, write there how training ended (the final step, loss and\n"
    "  checkpoint) or the error: a pod's terminationMessagePath.\n";

// Why this process cannot run CUDA kernels, or nullopt when it can.
std::optional<std::string> gpu_unavailable() {
#ifdef TESSEL_STAGE_CUDA
  return tessel::kernels::cuda::gpu_unavailable_reason();
#else
  return "this tessel-stage was built without CUDA";
#endif
}

tessel::stage::ChunkFactory chunk_factory(tessel::stage::Device device) {
#ifdef TESSEL_STAGE_CUDA
  if (device == tessel::stage::Device::kCuda) {
    return tessel::stage::cuda_chunk_factory(std::make_shared<tessel::stage::CudaDevice>());
  }
#else
  (void)device;
#endif
  return tessel::stage::cpu_chunk_factory();
}

// The levels of the data-parallel all-reduce over the job's islands: NCCL inside them for the
// CUDA backend when built with NCCL, else (null) the TCP ring at both levels over host memory.
tessel::stage::IslandLevelsFactory island_levels(tessel::stage::Device device,
                                                 const tessel::stage::JobSpec& job) {
#ifdef TESSEL_STAGE_NCCL
  if (device == tessel::stage::Device::kCuda) {
    return tessel::stage::nccl_island_levels(job.io_timeout);
  }
#else
  (void)device;
  (void)job;
#endif
  return {};
}

// Written before the progress is flushed: the message holds even when the flush times out.
// A failure is said, and does not change the exit status (training's outcome).
void write_termination_log(const std::string& path, const std::string& message, int rank) {
  std::ofstream out(path, std::ios::trunc);
  out << message;
  out.close();
  if (!out) {
    std::cerr << "tessel-stage rank " << rank << ": --termination-log: cannot write " << path
              << ": " << std::strerror(errno) << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free int");
  std::string job_path;
  std::string rank_text;
  std::string device_text = "auto";
  std::string termination_log;
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
    if ((arg == "--job" || arg == "--rank" || arg == "--device" || arg == "--termination-log") &&
        i + 1 < argc) {
      (arg == "--job"      ? job_path
       : arg == "--rank"   ? rank_text
       : arg == "--device" ? device_text
                           : termination_log) = argv[++i];
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
  tessel::stage::DeviceChoice device;
  try {
    const tessel::stage::DeviceRequest request = tessel::stage::parse_device_request(device_text);
    job = tessel::stage::load_job_spec(job_path);
    if (no_overlap) job.training.overlap = false;
    device = tessel::stage::choose_device(request, job.workload.precision, gpu_unavailable());
  } catch (const std::exception& e) {
    std::cerr << "tessel-stage: " << e.what() << '\n';
    return 2;
  }
  std::cerr << "tessel-stage rank " << rank << ": device "
            << tessel::stage::to_string(device.device) << ": " << device.reason << '\n';
  std::random_device entropy;
  const uint64_t incarnation = uint64_t{entropy()} << 32 | entropy();
  tessel::stage::pb::Tasklet tasklet = tessel::stage::tasklet_of(job, rank, incarnation);
  std::unique_ptr<tessel::stage::ProgressReporter> progress;
  try {
    progress = tessel::stage::progress_reporter_for(job, std::move(tasklet), std::cout);
  } catch (const std::exception& e) {  // its token or CA file
    std::cerr << "tessel-stage: " << e.what() << '\n';
    return 2;
  }
  int status = 1;
  try {
    status = tessel::stage::run_stage_process(job, rank, *progress, std::cerr, g_stop_signal,
                                              chunk_factory(device.device),
                                              island_levels(device.device, job));
  } catch (const std::exception& e) {  // the device could not be opened
    std::cerr << "tessel-stage rank " << rank << ": device " << to_string(device.device) << ": "
              << e.what() << '\n';
  }
  if (!termination_log.empty())
    write_termination_log(termination_log, progress->termination_message(), rank);
  if (!progress->flush(std::chrono::seconds(10))) {
    std::cerr << "tessel-stage rank " << rank << ": progress: the last events did not reach "
              << job.progress_address << " within 10 s\n";
  }
  return status;
}
