#include "noderuntime/stage/stage_process.h"

#include <csignal>
#include <cstring>
#include <memory>
#include <optional>

#include "kernels/cpu/threading.h"
#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/progress.h"
#include "noderuntime/stage/stage_runtime.h"
#include "noderuntime/transport/tcp_communicator.h"

namespace tessel::stage {
namespace {

std::unique_ptr<transport::TcpCommunicator> connect(const JobSpec& job, int rank) {
  const transport::PeerAddress& self = job.addresses[rank];
  const transport::TcpListener listener = transport::TcpListener::bind(self.host, self.port);
  transport::TcpOptions options;
  options.job_id = job.job_id;
  options.rank = rank;
  options.peers = job.addresses;
  options.connect_timeout = job.connect_timeout;
  options.io_timeout = job.io_timeout;
  options.links = job.links;
  return std::make_unique<transport::TcpCommunicator>(std::move(options), listener);
}

// Rank 0's newest complete checkpoint (or none), the same on every rank.
std::optional<int64_t> agreed_resume_step(const JobSpec& job, transport::Communicator& comm) {
  float step_plus_one = 0;  // exact for steps below 2^24
  if (comm.rank() == 0) {
    if (const auto latest = latest_checkpoint(job.checkpoint.dir)) {
      step_plus_one = static_cast<float>(*latest + 1);
    }
  }
  comm.all_reduce(&step_plus_one, 1, transport::DType::kF32, job.layout.world());
  if (step_plus_one == 0) return std::nullopt;
  return static_cast<int64_t>(step_plus_one) - 1;
}

// "SIGTERM", or null for 0 (no signal on this rank).
nlohmann::ordered_json signal_name(int signal) {
  if (signal == 0) return nullptr;
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation ? "SIG" + std::string(abbreviation) : std::to_string(signal);
}

int64_t parameter_count(const StageRuntime& runtime) {
  int64_t n = 0;
  for (const auto& chunk : runtime.chunks()) n += chunk->model.layout().total();
  return n;
}

}  // namespace

int run_stage_process(const JobSpec& job, int rank, std::ostream& out, std::ostream& err,
                      const std::atomic<int>& stop_signal) {
  const int world = job.layout.world_size();
  const auto tasklet =
      rank >= 0 && rank < world ? job.layout.tasklet_of(rank) : PipelineLayout::Tasklet{-1, -1};
  auto event = [&](const char* name) {
    return progress_event(name, rank, tasklet.stage, tasklet.replica);
  };
  if (tasklet.stage < 0) {
    nlohmann::ordered_json line = event("error");
    line["message"] =
        "--rank " + std::to_string(rank) + " is out of range [0, " + std::to_string(world) + ")";
    print_progress(out, line);
    err << "tessel-stage: " << line["message"].get<std::string>() << '\n';
    return 1;
  }
  std::optional<StepTrace> trace;
  if (!job.trace_path.empty()) trace.emplace(rank, job.addresses[rank].label);
  auto write_trace = [&] {
    if (trace) StepTrace::write({&*trace}, trace_path_for(job, rank));
  };
  try {
    kernels::cpu::set_num_threads(job.threads);
    const TokenCorpus corpus = load_corpus(job.data, job.model.vocab);
    const std::unique_ptr<transport::TcpCommunicator> comm = connect(job, rank);
    StageRuntime runtime(job.model, job.layout, job.training, corpus, *comm,
                         trace ? &*trace : nullptr);
    const bool checkpoints = !job.checkpoint.dir.empty();
    std::optional<int64_t> resumed;
    if (checkpoints && job.checkpoint.resume) {
      resumed = agreed_resume_step(job, *comm);
      if (resumed) load_checkpoint(job.checkpoint.dir, *resumed, runtime);
    }
    nlohmann::ordered_json start = event("start");
    start["world_size"] = world;
    start["steps"] = job.steps;
    start["parameters"] = parameter_count(runtime);
    start["resumed_from"] = resumed ? nlohmann::ordered_json(*resumed) : nlohmann::ordered_json();
    print_progress(out, start);

    int64_t saved_step = resumed.value_or(-1);
    auto checkpoint = [&] {
      save_checkpoint(job.checkpoint.dir, runtime, *comm);
      saved_step = runtime.steps_done();
      nlohmann::ordered_json line = event("checkpoint");
      line["step"] = saved_step;
      line["dir"] = checkpoint_step_dir(job.checkpoint.dir, saved_step);
      print_progress(out, line);
    };
    while (runtime.steps_done() < job.steps) {
      const StepReport report = runtime.train_step(stop_signal.load() != 0);
      print_progress(out, step_event(report, rank, tasklet.stage, tasklet.replica));
      const bool due = job.checkpoint.interval > 0 && report.step % job.checkpoint.interval == 0;
      if (checkpoints && (due || report.stop || report.step == job.steps)) checkpoint();
      if (report.stop) {
        const int signal = stop_signal.load();
        nlohmann::ordered_json line = event("stopped");
        line["step"] = report.step;
        line["signal"] = signal_name(signal);
        print_progress(out, line);
        write_trace();
        return signal != 0 ? 128 + signal : 0;
      }
    }
    if (checkpoints && saved_step != runtime.steps_done()) checkpoint();
    write_trace();
    nlohmann::ordered_json done = event("done");
    done["step"] = runtime.steps_done();
    print_progress(out, done);
    return 0;
  } catch (const std::exception& e) {
    nlohmann::ordered_json line = event("error");
    line["message"] = e.what();
    print_progress(out, line);
    err << "tessel-stage rank " << rank << " (" << job.addresses[rank].label
        << "): error: " << e.what() << '\n';
    try {
      write_trace();
    } catch (const std::exception& trace_error) {
      err << "tessel-stage rank " << rank << ": " << trace_error.what() << '\n';
    }
    return 1;
  }
}

}  // namespace tessel::stage
