#include "noderuntime/launcher/launcher.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "noderuntime/launcher/job_file.h"
#include "noderuntime/launcher/local_topology.h"
#include "noderuntime/launcher/progress_server.h"
#include "noderuntime/launcher/resume_skips.h"
#include "noderuntime/launcher/run_report.h"
#include "noderuntime/launcher/stage_binary.h"
#include "noderuntime/launcher/stage_devices.h"
#include "noderuntime/launcher/stage_processes.h"
#include "noderuntime/launcher/stop_signals.h"
#include "noderuntime/launcher/supervisor.h"
#include "noderuntime/launcher/text_format.h"
#include "noderuntime/launcher/trace_merge.h"
#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/device_choice.h"
#include "placement/atomic_file.h"
#include "placement/placement.h"
#include "proto/rendezvous/rendezvous_server.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text) {
  try {
    placement::write_file_atomically(path.string(), text);
  } catch (const placement::FileWriteError& e) {
    throw LocalJobError(e.what());
  }
}

// Refuses a resumed run that would have nothing to do: its newest committed checkpoint already
// holds the job's last step. Nothing is written, so the previous run's report stays as it was.
// Returns the step the run is to resume from (nullopt: from the beginning): the newest committed
// one (checkpoint.h latest_checkpoint); the stage processes fall back further past a rank file
// that does not verify, and say so.
std::optional<int64_t> check_resume(const LocalJob& job, const fs::path& dir) {
  if (!job.resume || job.checkpoint_interval < 0) return std::nullopt;
  const fs::path checkpoints = dir / "checkpoints";
  std::optional<int64_t> latest;
  try {
    latest = stage::latest_checkpoint(checkpoints.string());
  } catch (const std::exception& e) {
    throw LocalJobError(checkpoints.string() + ": cannot resume: " + e.what());
  }
  // A manifest with no committed step behind it: checkpoints were written, and none is usable.
  // Starting afresh would train over them; refuse before anything is written instead.
  const fs::path manifest = stage::checkpoint_manifest(checkpoints.string());
  if (!latest && fs::exists(manifest)) {
    throw LocalJobError(checkpoints.string() + ": cannot resume: " + manifest.string() +
                        " is damaged or names a step whose folder is missing or does not verify, "
                        "and no older committed step is left; restore the checkpoints, or start "
                        "afresh (checkpoint.resume: false, or another --output) (" +
                        (dir / "report.md").string() + " is left as it was)");
  }
  if (latest && *latest >= job.training.steps) {
    throw LocalJobError("nothing to do: checkpoint.resume is set and the newest checkpoint in " +
                        checkpoints.string() + " is at step " + std::to_string(*latest) +
                        ", at or past the job's last step (training.steps, or --steps: " +
                        std::to_string(job.training.steps) +
                        "); raise the steps to train further (" + (dir / "report.md").string() +
                        " is left as it was)");
  }
  return latest;
}

// The network's devices name every device of the topology once, each with a host.
void check_network(const LocalNetwork& network, const placement::Topology& topology) {
  if (network.server_host.empty()) throw LocalJobError("network.server_host: must not be empty");
  if (network.devices.empty()) return;
  if (static_cast<int>(network.devices.size()) != topology.size()) {
    throw LocalJobError("network.devices: " + std::to_string(network.devices.size()) +
                        " entries for the " + std::to_string(topology.size()) +
                        " devices of topology '" + topology.id + "' (one per device)");
  }
  for (size_t d = 0; d < network.devices.size(); ++d) {
    if (network.devices[d].host.empty()) {
      throw LocalJobError("network.devices[" + std::to_string(d) + "].host: must not be empty");
    }
  }
}

void say(std::FILE* out, const std::string& text) {
  if (!out) return;
  std::fprintf(out, "%s\n", text.c_str());
  std::fflush(out);
}

// The command line that replays the prediction from the files in the output folder.
std::string simulate_command(const LocalJob& job, const fs::path& dir) {
  std::string command = "tessel simulate --topology " + (dir / "topology.yaml").string() +
                        " --model " + (dir / "model.yaml").string() + " --placement " +
                        (dir / "placement.json").string() + " --stages " +
                        std::to_string(job.stages) + " --replicas " + std::to_string(job.replicas) +
                        " --schedule " + placement::to_string(job.schedule.kind);
  if (job.chunks() > 1) command += " --chunks " + std::to_string(job.chunks());
  if (!job.schedule.overlap) command += " --no-overlap";
  return command;
}

// The corpus's unigram entropy and a description; checks it holds one sequence.
void describe_data(const LocalJob& job, LocalRunResult& result) {
  stage::TokenCorpus corpus = [&] {
    try {
      return stage::load_corpus(job.data, job.workload.vocab);
    } catch (const std::exception& e) {
      throw LocalJobError(job.source + ": data: " + e.what());
    }
  }();
  try {
    corpus.sequences(job.workload.seq_len);
  } catch (const std::exception& e) {
    throw LocalJobError(job.source + ": data: " + e.what());
  }
  result.unigram_entropy = corpus.unigram_entropy();
  result.data_description =
      corpus.source() + printf_text(" (%.0f KB)", corpus.tokens().size() / 1e3);
}

uint64_t new_job_id() {
  std::random_device device;
  return (uint64_t{device()} << 32 | device()) ^ static_cast<uint64_t>(getpid());
}

// 32 random hexadecimal digits: the token the job's processes show the rendezvous.
std::string new_token() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) token += printf_text("%08x", device());
  return token;
}

}  // namespace

std::string default_output_dir(const LocalJob& job) { return "tessel-runs/" + job.name; }

LocalRunResult run_local_job(LocalJob job, const LocalRunOptions& options) {
  if (options.steps) {
    if (*options.steps < 1) throw LocalJobError("--steps: must be at least 1");
    job.training.steps = *options.steps;
  }
  try {
    stage::parse_device_request(options.device);  // what every process will check
  } catch (const stage::ConfigError& e) {
    throw LocalJobError(e.what());
  }
  const fs::path dir = fs::absolute(options.output_dir);
  const std::optional<int64_t> resuming = check_resume(job, dir);
  const std::string binary = find_stage_binary(options.stage_binary);
  LocalRunResult result;
  describe_data(job, result);

  // Plan on the job's network with this machine's measured compute.
  const placement::Topology topology = job_topology(job);
  check_network(options.network, topology);
  const ComputeSpeed speed =
      measure_compute_speed(job.workload, job.training.threads, job.world_size());
  // A resumed run keeps the H its checkpoint was trained at (the earlier run's job.json).
  result.plan =
      plan_local_job(job, topology, speed, options.placement_file,
                     resuming ? sync_every_of_job_file((dir / "job.json").string()) : std::nullopt);
  result.output_dir = dir.string();
  result.simulate_command = simulate_command(job, dir);
  std::error_code ec;
  fs::create_directories(dir / "logs", ec);
  if (ec) throw LocalJobError(dir.string() + ": cannot create the output folder: " + ec.message());
  if (options.trace) fs::create_directories(dir / "traces", ec);
  if (ec) throw LocalJobError((dir / "traces").string() + ": cannot create: " + ec.message());

  const fs::path topology_path = dir / "topology.yaml";
  write_file(topology_path, placement::topology_to_yaml(result.plan.topology));
  // The mode as run (H and bits as numbers), so that the simulate command replays this run's H.
  placement::Workload run_workload = job.workload;
  run_workload.data_parallel = result.plan.data_parallel.mode;
  write_file(dir / "model.yaml", placement::workload_to_yaml(run_workload));
  write_file(dir / "placement.json", placement::placement_to_json(result.plan.placement).dump(2));
  const uint64_t job_id = new_job_id();
  const LocalNetwork& network = options.network;
  ProgressServer progress(job_id, 0, network.server_host);
  // The stage processes bind ports the kernel picks and find each other here.
  rendezvous::RendezvousServer rendezvous(network.server_host + ":0",
                                          grpc::InsecureServerCredentials());
  const std::string token = new_token();
  rendezvous.table().add_job(job_id, job.world_size(), token);
  const fs::path token_path = dir / "rendezvous.token";
  write_file(token_path, token + "\n");
  fs::permissions(token_path, fs::perms::owner_read | fs::perms::owner_write, ec);
  JobFilePaths paths;
  paths.progress_address = progress.address();
  paths.rendezvous_address = network.server_host + ":" + std::to_string(rendezvous.port());
  paths.token_file = fs::absolute(token_path).string();
  paths.topology = topology_path.string();
  paths.checkpoint_dir = (dir / "checkpoints").string();
  if (options.trace) paths.trace_pattern = (dir / "traces" / "trace-{rank}.json").string();
  std::vector<std::vector<std::string>> command_prefixes;
  for (int rank = 0; rank < job.world_size() && !network.devices.empty(); ++rank) {
    const DeviceHost& device = network.devices[result.plan.device_of_rank[rank]];
    paths.rank_hosts.push_back(device.host);
    command_prefixes.push_back(device.command_prefix);
  }
  paths.shape_links = network.shape_links;
  paths.warm_up_links = network.warm_up_links;
  result.links_shaped = network.shape_links;
  const std::string job_text = make_job_json(job, result.plan, paths, job_id).dump(2) + "\n";
  const fs::path job_path = dir / "job.json";
  write_file(job_path, job_text);
  try {
    stage::parse_job_spec(job_text, job_path.string());  // what every process will check
  } catch (const std::exception& e) {
    throw LocalJobError(std::string("the stage runtime refuses the job: ") + e.what());
  }

  std::vector<std::string> labels;
  for (int rank = 0; rank < job.world_size(); ++rank) {
    labels.push_back(tasklet_label(rank % job.stages, rank / job.stages));
    result.ranks.push_back({labels.back(), result.plan.device_of_rank[rank], 0, "", "", {}});
  }
  const std::string steps_text =
      resuming
          ? "steps " + std::to_string(*resuming + 1) + " to " + std::to_string(job.training.steps) +
                " (resuming from the checkpoint of step " + std::to_string(*resuming) + ")"
          : std::to_string(job.training.steps) + " steps";
  say(options.out, "tessel local: " + job.name + ": " + std::to_string(job.stages) + " stages x " +
                       std::to_string(job.replicas) + " replicas on " + result.plan.topology.name +
                       ", " + steps_text + "; output " + dir.string());
  say(options.out,
      printf_text("tessel local: compute %.2f GFLOP/s per process (measured); predicted "
                  "iteration %.3f s, bubble %.0f%%",
                  result.plan.speed.effective_flops_per_s() / 1e9,
                  result.plan.simulation.iteration_s,
                  100 * result.plan.simulation.bubble_fraction));
  if (const placement::DataParallelChoice& dp = result.plan.data_parallel; dp.low_communication()) {
    say(options.out, "tessel local: data parallelism " + placement::data_parallel_name(dp.mode) +
                         "; " + dp.sync_every_reason + "; " + dp.delta_bits_reason);
  }

  ProgressTracker tracker(job.world_size(), job.training.steps);
  SupervisedRun run;
  {
    StopSignals signals;
    StageProcesses processes(binary, job_path.string(), labels, (dir / "logs").string(),
                             {"--device", options.device}, command_prefixes);
    // Each rank says on its log what it computes on; ranks computing in another precision than
    // the job's (a bf16 job in fp32 on the CPU) are said once here, when every rank has said
    // (or at the end, of those that did).
    std::vector<std::optional<StageDevice>> devices(job.world_size());
    int devices_known = 0;
    bool noted = false;
    const auto note_precision = [&] {
      if (noted) return;
      const std::string note = precision_note(job.workload.precision, devices, labels);
      if (note.empty()) return;
      noted = true;
      say(options.err, "tessel local: " + note);
    };
    // A resume says what its ranks skipped (damaged or unfinished checkpoints) once every rank
    // has started, before it trains, or at the end when some never started.
    std::vector<std::string> logs;
    for (const StageChild& child : processes.children()) logs.push_back(child.log_path);
    int started = 0;
    bool skips_said = !job.resume || job.checkpoint_interval < 0;
    const auto say_skips = [&] {
      if (skips_said) return;
      skips_said = true;
      result.resume_skipped = resume_skips(logs);
      if (result.resume_skipped.empty()) return;
      const std::optional<int64_t> from = tracker.resumed_from();
      say(options.err,
          "tessel local: " +
              (from ? "resumed from the checkpoint of step " + std::to_string(*from) + ", skipping"
                    : std::string("resume: skipped")) +
              " (each rank's log in " + (dir / "logs").string() + " says it too):");
      for (const std::string& skip : result.resume_skipped) say(options.err, "  " + skip);
    };
    SupervisorOptions supervision{options.grace_s, options.out, options.tty, {}};
    supervision.on_started = [&](int rank) {
      if (++started == job.world_size()) say_skips();
      if (devices[rank]) return;
      devices[rank] = device_of_log(processes.children()[rank].log_path);
      if (devices[rank] && ++devices_known == job.world_size()) note_precision();
    };
    run = supervise(processes, progress, signals, tracker, supervision);
    say_skips();
    note_precision();
    for (const StageChild& child : processes.children()) {
      result.ranks[child.rank].exit = child.exit ? child.exit->describe() : "not started";
      if (!devices[child.rank]) devices[child.rank] = device_of_log(child.log_path);
      if (devices[child.rank]) result.ranks[child.rank].backend = devices[child.rank]->device;
    }
  }
  if (const auto joined = rendezvous.table().table(job_id)) {  // the ports the ranks bound
    for (int rank = 0; rank < job.world_size(); ++rank) {
      const std::string& address = joined->addresses[rank];
      result.ranks[rank].port =
          static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
    }
  }
  result.status = run.status;
  result.exit_code = run.exit_code;
  result.message = run.message;
  result.wall_s = run.wall_s;
  result.steps = tracker.steps();
  // The processes say where they resumed; when none got to say it, the checkpoint the launcher
  // saw is where they were to resume.
  result.resumed_from = tracker.resumed_from() ? tracker.resumed_from() : resuming;
  result.measured_iteration_s =
      job.data_parallel.enabled ? tracker.mean_step_s() : tracker.iteration_s();
  for (int rank = 0; rank < job.world_size(); ++rank) {
    result.ranks[rank].steps = tracker.per_rank()[rank];
  }

  // The run's own outcome is said first; a report that cannot be written is said after it,
  // never instead of it.
  std::vector<std::string> write_errors;
  if (options.trace) {
    std::vector<std::string> files;
    for (int rank = 0; rank < job.world_size(); ++rank) {
      files.push_back((dir / "traces" / ("trace-" + std::to_string(rank) + ".json")).string());
    }
    try {
      const TraceMergeResult merged = merge_traces(files, (dir / "trace.json").string());
      result.trace_written = merged.merged > 0;
      result.trace_missing = merged.missing;
    } catch (const std::exception& e) {
      write_errors.push_back(std::string("the merged trace was not written: ") + e.what());
    }
  }
  try {
    write_report(job, result);
  } catch (const std::exception& e) {
    write_errors.push_back(std::string("the report was not written: ") + e.what());
  }
  for (const std::string& error : write_errors) {
    result.report_error += (result.report_error.empty() ? "" : "; ") + error;
  }

  if (result.status == RunStatus::kFailed) {
    say(options.err, "tessel local: error: " + result.message);
  } else if (result.status == RunStatus::kStopped) {
    say(options.out, "tessel local: stopped " + result.message + " after step " +
                         std::to_string(result.steps.empty() ? 0 : result.steps.back().step));
  }
  if (result.measured_iteration_s) {
    const double measured = *result.measured_iteration_s;
    const double predicted = result.plan.simulation.iteration_s;
    say(options.out, printf_text("tessel local: iteration measured %.3f s, predicted %.3f s "
                                 "(%+.1f%%)",
                                 measured, predicted, 100 * (predicted - measured) / measured));
    say(options.out,
        printf_text("tessel local: loss %.4f -> %.4f; unigram entropy of the data "
                    "%.4f",
                    result.steps.front().loss, final_loss(result.steps), result.unigram_entropy));
  }
  say(options.out, std::string("tessel local: ") +
                       (result.status == RunStatus::kDone     ? "done"
                        : result.status == RunStatus::kFailed ? "failed"
                                                              : "stopped") +
                       ": " + steps_done_text(job, result));
  if (!result.report_error.empty()) {
    say(options.err, "tessel local: error: " + result.report_error);
    if (result.exit_code == 0) result.exit_code = 1;
  } else {
    say(options.out, "tessel local: report " + (dir / "report.md").string());
  }
  return result;
}

}  // namespace tessel::launcher
