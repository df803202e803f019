#include "noderuntime/stage/stage_process.h"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "kernels/cpu/threading.h"
#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/checkpoint_resume.h"
#include "noderuntime/stage/rendezvous_session.h"
#include "noderuntime/stage/stage_credentials.h"
#include "noderuntime/stage/stage_runtime.h"
#include "noderuntime/transport/tcp_communicator.h"
#include "proto/rendezvous/rendezvous_client.h"

namespace tessel::stage {
namespace {

// The peer table from the Rendezvous service: this rank joins with the address it listens at;
// `session` keeps the client for what the ranks agree on later.
std::vector<transport::PeerAddress> joined_peers(const JobSpec& job, int rank,
                                                 const pb::Tasklet& tasklet, uint16_t port,
                                                 RendezvousSession& session) {
  const RendezvousSpec& spec = *job.rendezvous;
  std::string host = job.addresses[rank].host;
  if (!spec.advertise_env.empty()) {
    const char* value = std::getenv(spec.advertise_env.c_str());
    if (value == nullptr || *value == '\0') {
      throw ConfigError("rendezvous.advertise_env: $" + spec.advertise_env +
                        " is not set: it should hold the host this rank is reached at");
    }
    host = value;
  }
  rendezvous::Identity identity;
  identity.job_id = job.job_id;
  identity.rank = rank;
  identity.stage = tasklet.stage();
  identity.replica = tasklet.replica();
  identity.incarnation = tasklet.incarnation();
  identity.world_size = job.layout.world_size();
  identity.token = read_token_file(spec.token_file, "rendezvous.token_file");
  session.client = std::make_shared<rendezvous::RendezvousClient>(
      spec.address, channel_credentials(spec.ca_file, "rendezvous.ca_file"), identity);
  const rendezvous::JoinedTable table =
      session.client->join(host + ":" + std::to_string(port), job.connect_timeout);
  session.generation = table.generation;
  session.timeout = job.connect_timeout;
  std::vector<transport::PeerAddress> peers;
  for (size_t r = 0; r < table.addresses.size(); ++r) {
    const std::string& address = table.addresses[r];
    const size_t colon = address.rfind(':');
    std::string peer_host = address.substr(0, colon);
    if (peer_host.size() > 2 && peer_host.front() == '[' && peer_host.back() == ']') {
      peer_host = peer_host.substr(1, peer_host.size() - 2);  // [IPv6]
    }
    peers.push_back({peer_host, static_cast<uint16_t>(std::stoi(address.substr(colon + 1))),
                     job.addresses[r].label});
  }
  return peers;
}

// With a rendezvous, `session` is its session once connected.
std::unique_ptr<transport::TcpCommunicator> connect(const JobSpec& job, int rank,
                                                    const pb::Tasklet& tasklet,
                                                    std::optional<RendezvousSession>& session) {
  const transport::PeerAddress& self = job.addresses[rank];
  const transport::TcpListener listener = transport::TcpListener::bind(self.host, self.port);
  transport::TcpOptions options;
  options.job_id = job.job_id;
  options.rank = rank;
  if (job.rendezvous) {
    session.emplace();
    options.peers = joined_peers(job, rank, tasklet, listener.port(), *session);
  } else {
    options.peers = job.addresses;
  }
  options.connect_timeout = job.connect_timeout;
  options.io_timeout = job.io_timeout;
  if (job.warm_up_links) options.warm_up_peers = job.layout.pipeline_neighbours(rank);
  if (job.shape_links) {
    options.links = job.links;
  } else if (job.links) {
    // The network is the link: its bandwidths size the streams (with the RTT the kernel
    // measures), and nothing is shaped here.
    for (int peer = 0; peer < job.layout.world_size(); ++peer) {
      options.link_capacity.push_back(peer == rank ? 0.0
                                                   : job.links->shape(rank, peer).bytes_per_s);
    }
  }
  return std::make_unique<transport::TcpCommunicator>(std::move(options), listener);
}

// "SIGTERM", or empty for 0 (no signal on this rank).
std::string signal_name(int signal) {
  if (signal == 0) return "";
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation ? "SIG" + std::string(abbreviation) : std::to_string(signal);
}

int64_t parameter_count(const StageRuntime& runtime) {
  int64_t n = 0;
  for (const auto& chunk : runtime.chunks()) n += chunk->model.layout().total();
  return n;
}

}  // namespace

pb::Tasklet tasklet_of(const JobSpec& job, int rank, uint64_t incarnation) {
  const int world = job.layout.world_size();
  const auto t =
      rank >= 0 && rank < world ? job.layout.tasklet_of(rank) : PipelineLayout::Tasklet{-1, -1};
  pb::Tasklet tasklet;
  tasklet.set_job_id(job.job_id);
  tasklet.set_rank(rank);
  tasklet.set_stage(t.stage);
  tasklet.set_replica(t.replica);
  tasklet.set_incarnation(incarnation);
  return tasklet;
}

int run_stage_process(const JobSpec& job, int rank, ProgressReporter& progress, std::ostream& err,
                      const std::atomic<int>& stop_signal, const ChunkFactory& make_chunk,
                      const IslandLevelsFactory& make_levels) {
  const int world = job.layout.world_size();
  if (progress.tasklet().stage() < 0) {
    const std::string message =
        "--rank " + std::to_string(rank) + " is out of range [0, " + std::to_string(world) + ")";
    pb::StageEvent failed;
    failed.mutable_error()->set_message(message);
    progress.report(failed);
    err << "tessel-stage: " << message << '\n';
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
    std::optional<RendezvousSession> session;
    const std::unique_ptr<transport::TcpCommunicator> comm =
        connect(job, rank, progress.tasklet(), session);
    DataParallelIslands islands;
    islands.island_of_rank = job.islands;
    islands.make_levels = make_levels;
    if (session) {  // NCCL's ids go through the rendezvous too
      islands.id_exchange = [&session](transport::Communicator&, const std::vector<int>& island) {
        return rendezvous_id_exchange(*session, island);
      };
    }
    StageRuntime runtime(job.model, job.layout, job.training, corpus, *comm,
                         trace ? &*trace : nullptr, make_chunk, islands);
    const bool checkpoints = !job.checkpoint.dir.empty();
    std::optional<int64_t> resumed;
    const CheckpointDirs dirs =
        job.checkpoint.shared ? CheckpointDirs::kShared : CheckpointDirs::kPerRank;
    if (checkpoints && job.checkpoint.resume) {
      resumed = resume_from_checkpoints(job.checkpoint.dir, dirs, runtime, *comm, err);
    }
    pb::StageEvent start;
    pb::Started& started = *start.mutable_started();
    started.set_world_size(world);
    started.set_steps(job.steps);
    started.set_parameters(parameter_count(runtime));
    if (resumed) started.set_resumed_from(*resumed);
    progress.report(start);

    int64_t saved_step = resumed.value_or(-1);
    auto checkpoint = [&] {
      save_checkpoint(job.checkpoint.dir, runtime, *comm, {job.checkpoint.keep, resumed}, dirs);
      saved_step = runtime.steps_done();
      pb::StageEvent written;
      written.mutable_checkpoint()->set_step(saved_step);
      written.mutable_checkpoint()->set_dir(checkpoint_step_dir(job.checkpoint.dir, saved_step));
      progress.report(written);
    };
    while (runtime.steps_done() < job.steps) {
      const StepReport report =
          runtime.train_step([&stop_signal] { return stop_signal.load() != 0; });
      pb::StageEvent step;
      *step.mutable_step() = progress::step_message(report);
      progress.report(step);
      const bool due = job.checkpoint.interval > 0 && report.step % job.checkpoint.interval == 0;
      if (checkpoints && (due || report.stop || report.step == job.steps)) checkpoint();
      if (report.stop) {
        const int signal = stop_signal.load();
        pb::StageEvent stopped;
        stopped.mutable_stopped()->set_step(report.step);
        stopped.mutable_stopped()->set_signal(signal_name(signal));
        progress.report(stopped);
        write_trace();
        return signal != 0 ? 128 + signal : 0;
      }
    }
    if (checkpoints && saved_step != runtime.steps_done()) checkpoint();
    write_trace();
    pb::StageEvent done;
    done.mutable_done()->set_step(runtime.steps_done());
    progress.report(done);
    return 0;
  } catch (const std::exception& e) {
    pb::StageEvent failed;
    failed.mutable_error()->set_message(e.what());
    progress.report(failed);
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
