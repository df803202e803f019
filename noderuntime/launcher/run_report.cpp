#include "noderuntime/launcher/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "noderuntime/launcher/svg_chart.h"
#include "noderuntime/launcher/text_format.h"
#include "placement/atomic_file.h"
#include "placement/placement.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

std::string seconds(double s) {
  return s < 1 ? printf_text("%.1f ms", s * 1e3) : printf_text("%.3f s", s);
}

std::string status_line(const LocalJob& job, const LocalRunResult& r) {
  const std::string progress = steps_done_text(job, r);
  switch (r.status) {
    case RunStatus::kDone:
      return "**done**: " + progress;
    case RunStatus::kStopped:
      return "**stopped** " + r.message + ": " + progress;
    case RunStatus::kFailed:
      return "**failed**: " + r.message + "; " + progress;
  }
  return "";
}

void job_section(std::ostream& o, const LocalJob& job, const LocalRunResult& r) {
  const placement::Workload& w = job.workload;
  const int m = w.micro_batches_per_replica(job.replicas);
  o << "## Job\n\n| | |\n|---|---|\n"
    << printf_text(
           "| model | %d layers, hidden %d, %d heads, FFN %d, sequence %d, vocabulary %d: "
           "%.2f M parameters |\n",
           w.layers, w.hidden, w.heads, w.ffn(), w.seq_len, w.vocab, w.total_parameters() / 1e6)
    << "| data | " << r.data_description
    << printf_text(", unigram entropy %.3f nats per byte |\n", r.unigram_entropy)
    << printf_text(
           "| batch | %d sequences per step: micro-batch %d, %d micro-batches per replica, "
           "%d replicas; %lld tokens |\n",
           w.global_batch, w.micro_batch, m, job.replicas,
           static_cast<long long>(w.global_batch) * w.seq_len)
    << "| schedule | " << placement::to_string(job.schedule.kind)
    << (job.chunks() > 1 ? printf_text(", %d chunks per stage", job.chunks()) : "")
    << (job.schedule.overlap ? ", communication overlapped" : ", communication blocking") << " |\n"
    << "| data parallelism | " << placement::data_parallel_name(r.plan.data_parallel.mode)
    << (r.plan.data_parallel.low_communication() ? ": " + r.plan.data_parallel.sync_every_reason +
                                                       "; " + r.plan.data_parallel.delta_bits_reason
                                                 : "")
    << " |\n"
    << printf_text(
           "| processes | %d stages x %d replicas, %d kernel thread%s each, on %d cores |\n",
           job.stages, job.replicas, job.training.threads, job.training.threads == 1 ? "" : "s",
           r.plan.speed.cores)
    << "| network | " << r.plan.topology.name << " (`" << r.plan.topology.id << "`)"
    << (job.topology.bandwidth_scale != 1 || job.topology.latency_scale != 1
            ? printf_text(", bandwidth x %g, latency x %g", job.topology.bandwidth_scale,
                          job.topology.latency_scale)
            : "")
    << (r.links_shaped ? ", every link emulated between the processes |\n"
                       : ", the links left to the network between the processes' hosts |\n")
    << printf_text(
           "| compute | measured %.2f GFLOP/s per process alone; %d cores shared by the "
           "processes that compute at once give each %.0f%% of that: %.2f GFLOP/s planned |\n\n",
           r.plan.speed.flops_per_s / 1e9, r.plan.speed.cores, 100 * r.plan.speed.share,
           r.plan.speed.effective_flops_per_s() / 1e9);
}

std::string link_text(const placement::Topology& t, int a, int b) {
  return printf_text("%g Gbit/s, %g ms", t.bandwidth_gbps(a, b), t.latency_ms(a, b));
}

void placement_section(std::ostream& o, const LocalJob& job, const LocalRunResult& r) {
  const LocalPlan& plan = r.plan;
  o << "## Placement\n\n"
    << "Strategy `" << plan.placement.strategy << "`; rank = replica x " << job.stages
    << " + stage.\n\n"
    << "| rank | stage | replica | device | site | layers | link to the next stage | computes "
       "on | exit |\n"
    << "|---:|---:|---:|---:|---|---:|---|---|---|\n";
  for (size_t rank = 0; rank < r.ranks.size(); ++rank) {
    const int stage = static_cast<int>(rank) % job.stages;
    const int replica = static_cast<int>(rank) / job.stages;
    const int device = plan.device_of_rank[rank];
    const std::string next =
        stage + 1 < job.stages
            ? link_text(r.plan.topology, device, plan.placement.pipelines[replica][stage + 1])
            : "";
    o << printf_text("| %zu | %d | %d | %d | ", rank, stage, replica, device)
      << r.plan.topology.devices[device].site << " | " << plan.stage_layers[stage] << " | " << next
      << " | " << (r.ranks[rank].backend.empty() ? "?" : r.ranks[rank].backend) << " | "
      << r.ranks[rank].exit << " |\n";
  }
  o << "\n```\n" << placement::placement_to_table(plan.placement, r.plan.topology) << "```\n\n";
}

struct RankMeans {
  double step_s = 0, compute_s = 0, wait_s = 0, bubble = 0;
};

RankMeans means_after_first(const std::vector<progress::StepMetrics>& steps) {
  RankMeans m;
  const size_t first = steps.size() > 1 ? 1 : 0;
  const double n = double(steps.size() - first);
  for (size_t i = first; i < steps.size(); ++i) {
    m.step_s += steps[i].step_s / n;
    m.compute_s += steps[i].compute_s / n;
    m.wait_s += steps[i].network_wait_s / n;
    m.bubble += steps[i].bubble_fraction / n;
  }
  return m;
}

void timing_section(std::ostream& o, const LocalJob& job, const LocalRunResult& r) {
  const placement::SimulationResult& sim = r.plan.simulation;
  o << "## Iteration time: measured against predicted\n\n";
  if (!r.measured_iteration_s) {
    o << "No step finished, so there is nothing to compare. Predicted: " << seconds(sim.iteration_s)
      << " per iteration.\n\n";
    return;
  }
  const double measured = *r.measured_iteration_s;
  double bubble = 0, wait = 0;
  for (const RankRecord& rank : r.ranks) {
    const RankMeans m = means_after_first(rank.steps);
    bubble += m.bubble / r.ranks.size();
    wait += m.wait_s / r.ranks.size();
  }
  double sim_wait = 0;
  for (double w : sim.network_wait_s) sim_wait += w / sim.network_wait_s.size();
  o << "| | measured | predicted (simulator) |\n|---|---:|---:|\n"
    << "| iteration | " << seconds(measured) << " | " << seconds(sim.iteration_s)
    << printf_text(" (%+.1f%%) |\n", 100 * (sim.iteration_s - measured) / measured)
    << printf_text("| bubble (mean over ranks) | %.1f%% | %.1f%% |\n", 100 * bubble,
                   100 * sim.bubble_fraction)
    << "| network wait per rank | " << seconds(wait) << " | " << seconds(sim_wait) << " |\n\n"
    << (job.data_parallel.enabled
            ? "Measured: the mean over the steps after the first of the slowest rank's step "
              "time (in the low-communication mode one step in every sync period also waits "
              "for the exchange; the prediction is the mean over a period). "
            : "Measured: the median over the steps after the first of the slowest rank's step "
              "time. ")
    << "Predicted: one iteration replayed event by event (the planner's closed form says "
    << seconds(r.plan.closed_form_s) << "). Reproduce it with\n\n```\n"
    << r.simulate_command << "\n```\n\n"
    << "| rank | tasklet | step | compute | network wait | bubble | simulated compute | "
       "simulated wait |\n|---:|---|---:|---:|---:|---:|---:|---:|\n";
  for (size_t rank = 0; rank < r.ranks.size(); ++rank) {
    const RankMeans m = means_after_first(r.ranks[rank].steps);
    const size_t stage = rank % job.stages;
    o << printf_text("| %zu | ", rank) << r.ranks[rank].label << " | " << seconds(m.step_s) << " | "
      << seconds(m.compute_s) << " | " << seconds(m.wait_s)
      << printf_text(" | %.0f%% | ", 100 * m.bubble) << seconds(sim.compute_busy_s[stage]) << " | "
      << seconds(sim.network_wait_s[stage]) << " |\n";
  }
  o << "\n";
}

void loss_section(std::ostream& o, const LocalRunResult& r) {
  o << "## Loss\n\n";
  if (!r.resume_skipped.empty()) {
    o << "Skipped on resuming (each rank's log in `logs/` says it too):\n\n";
    for (const std::string& skip : r.resume_skipped) o << "- " << skip << "\n";
    o << "\n";
  }
  if (r.steps.empty()) {
    o << "No step finished.\n";
    return;
  }
  double tokens_per_s = 0;
  const size_t first = r.steps.size() > 1 ? 1 : 0;
  for (size_t i = first; i < r.steps.size(); ++i) {
    tokens_per_s += r.steps[i].tokens_per_s / double(r.steps.size() - first);
  }
  const double last = final_loss(r.steps);
  o << "![loss curve](loss.svg)\n\n"
    << (r.resumed_from ? printf_text("Resumed from the checkpoint of step %lld: step %lld, the "
                                     "first of this run, ",
                                     static_cast<long long>(*r.resumed_from),
                                     static_cast<long long>(r.steps.front().step))
                       : std::string("First step "))
    << printf_text(
           "%.4f, final %.4f (mean of the last steps); the unigram entropy of the "
           "data is %.4f nats, so the final loss is %.0f%% of it: %s.\n\n",
           r.steps.front().loss, last, r.unigram_entropy, 100 * last / r.unigram_entropy,
           last < r.unigram_entropy ? "the model uses context the byte frequencies alone miss"
                                    : "not yet below what byte frequencies alone give")
    << printf_text("Throughput: %.0f tokens/s (mean over the steps after the first).\n\n",
                   tokens_per_s);
}

void files_section(std::ostream& o, const LocalRunResult& r) {
  o << "## Files\n\n";
  if (r.trace_written) {
    o << "- `trace.json`: every rank's forward, backward, sends, receives and all-reduces on one "
         "timeline (open in https://ui.perfetto.dev)";
    if (!r.trace_missing.empty())
      o << printf_text("; %zu rank(s) wrote none", r.trace_missing.size());
    o << "\n";
  }
  o << "- `job.json`: what every stage process ran (noderuntime/stage/job_spec.h)\n"
    << "- `placement.json`, `topology.yaml`, `model.yaml`: the inputs of the prediction\n"
    << "- `logs/rank-R.log`: each stage process's standard error\n";
}

void write_file(const fs::path& path, const std::string& text) {
  placement::write_file_atomically(path.string(), text);
}

}  // namespace

std::string steps_done_text(const LocalJob& job, const LocalRunResult& r) {
  const long long run = static_cast<long long>(r.steps.size());
  if (!r.resumed_from) {
    const long long last = r.steps.empty() ? 0 : static_cast<long long>(r.steps.back().step);
    return printf_text("%lld of %d steps in %.1f s", last, job.training.steps, r.wall_s);
  }
  const long long from = static_cast<long long>(*r.resumed_from);
  if (r.steps.empty()) {
    return printf_text("0 steps run (%lld left of %d after the checkpoint of step %lld) in %.1f s",
                       job.training.steps - from, job.training.steps, from, r.wall_s);
  }
  return printf_text("%lld step%s run (%lld to %lld of %d), resumed from step %lld, in %.1f s", run,
                     run == 1 ? "" : "s", static_cast<long long>(r.steps.front().step),
                     static_cast<long long>(r.steps.back().step), job.training.steps, from,
                     r.wall_s);
}

double final_loss(const std::vector<progress::StepMetrics>& steps) {
  if (steps.empty()) return 0;
  const size_t n = std::clamp<size_t>(steps.size() / 10, 1, 10);
  double sum = 0;
  for (size_t i = steps.size() - n; i < steps.size(); ++i) sum += steps[i].loss;
  return sum / double(n);
}

void write_report(const LocalJob& job, const LocalRunResult& result) {
  const fs::path dir(result.output_dir);
  std::ostringstream o;
  o << "# tessel local: " << job.name << "\n\n" << status_line(job, result) << "\n\n";
  job_section(o, job, result);
  placement_section(o, job, result);
  timing_section(o, job, result);
  loss_section(o, result);
  files_section(o, result);
  write_file(dir / "report.md", o.str());
  if (result.steps.empty()) return;
  LineChart chart;
  chart.title = "tessel local: " + job.name + ", training loss";
  chart.x_label = "step";
  chart.y_label = "loss (nats per byte)";
  for (const progress::StepMetrics& s : result.steps) {
    chart.points.emplace_back(double(s.step), s.loss);
  }
  chart.references.push_back(
      {result.unigram_entropy, printf_text("unigram entropy %.3f", result.unigram_entropy)});
  write_file(dir / "loss.svg", render_svg(chart));
}

}  // namespace tessel::launcher
