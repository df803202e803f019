// bench/runtime (a): communication overlapped with computation, end to end through `tessel
// local`. Two pipeline stages (one replica, so the two processes have a core each on a 2-core
// machine) joined by an emulated link slow enough that the iteration is communication-bound:
// each activation or gradient message takes --ratio (default 0.55) times one stage's forward +
// backward of a micro-batch as measured here, so a rank's messages (m out, m in) take 1.1 x its
// compute. The same job runs with overlap on and off.
//
//   compute        the slowest rank's compute time per iteration (measured, overlap on)
//   communication  one rank's messages per iteration, one after the other: m activations out
//                  and m gradients in (or the reverse), each B x T x C floats at the link's
//                  bandwidth plus its latency
// Goals: with overlap, iteration <= 1.15 x max(compute, communication); overlap at least
// 1.4 x faster than without. GPipe by default: it keeps all m micro-batches in flight, where
// 1F1B keeps at most p, which caps how much of a slow link it can hide (--schedule 1f1b shows
// it).
//   overlap_bench [--steps N] [--ratio R] [--micro-batches M] [--schedule gpipe|1f1b]
//                 [--stage-binary PATH] [--keep] [--trace]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench/runtime/local_bench_support.h"
#include "placement/topology.h"

namespace {

using namespace tessel;

constexpr double kLatencyS = 0.001;

struct Setup {
  double ratio = 0.55;
  int micro_batches = 16;
  std::string schedule = "gpipe";
};

std::string job_yaml(const Setup& s, int steps, bool overlap) {
  return "name: overlap\n"
         "topology: {file: link.yaml}\n"
         "model: {layers: 2, hidden: 64, heads: 4, seq_len: 256}\n"
         "training: {steps: " +
         std::to_string(steps) +
         ", micro_batch: 8, global_batch: " + std::to_string(8 * s.micro_batches) +
         ", learning_rate: 0.001}\n"
         "data: {synthetic: {seed: 3, bytes: 400000}}\n"
         "schedule: {kind: " +
         s.schedule + ", overlap: " + (overlap ? "true" : "false") +
         "}\n"
         "pipeline: {stages: 2, replicas: 1}\n"
         "timeouts: {io_s: 300}\n";
}

// Two sites of one device each, joined by one link.
void write_link_topology(const std::string& path, double gbps) {
  char text[1024];
  std::snprintf(text, sizeof text,
                "format_version: 1\nid: one-link\nname: two processes, one shaped link\n"
                "gpu_types: {local-cpu: {peak_tflops_fp16_tensor: 0.1, memory_gib: 4}}\n"
                "sites: [{name: a, gpus: 1}, {name: b, gpus: 1}]\n"
                "devices: [{id: 0, site: a, gpu: local-cpu}, {id: 1, site: b, gpu: local-cpu}]\n"
                "network:\n  intra_site: {latency_ms: 0.1, bandwidth_gbps: 10}\n"
                "  inter_site_default: {latency_ms: %.17g, bandwidth_gbps: %.17g}\n",
                kLatencyS * 1e3, gbps);
  std::ofstream(path) << text;
}

}  // namespace

int main(int argc, char** argv) {
  Setup setup;
  const bench::BenchOptions o = bench::parse_bench_options(
      argc, argv,
      "overlap_bench [--steps N] [--ratio R] [--micro-batches M] [--schedule gpipe|1f1b] "
      "[--stage-binary PATH] [--keep] [--trace]",
      [&](const std::string& arg, const char* value, int& i) {
        bool ok = false;
        if (arg == "--ratio" && value) ok = (setup.ratio = std::atof(value)) > 0;
        if (arg == "--micro-batches" && value) ok = (setup.micro_batches = std::atoi(value)) >= 2;
        if (arg == "--schedule" && value) {
          setup.schedule = value;
          ok = setup.schedule == "gpipe" || setup.schedule == "1f1b";
        }
        if (ok) ++i;
        return ok;
      });
  const std::filesystem::path dir(o.scratch);
  const std::string job_path = (dir / "job.yaml").string();
  std::ofstream(job_path) << job_yaml(setup, o.steps, true);
  launcher::LocalJob job = launcher::load_local_job(job_path);

  // A first run on a fast link measures what one micro-batch costs a stage here (the slower
  // stage: the last one also runs the head); the link is then set so that one message takes
  // `ratio` times that.
  const std::string link_path = (dir / "link.yaml").string();
  write_link_topology(link_path, 10);
  const launcher::LocalRunResult calibration = bench::run_job(job, o, "calibration");
  const int m = setup.micro_batches;
  const double stage_s = bench::compute_s(calibration) / m;
  const double message_bytes = job.workload.activation_message_bytes();
  const double transfer_s = setup.ratio * stage_s;
  const double gbps = message_bytes * 8 / transfer_s / 1e9;
  write_link_topology(link_path, gbps);

  const launcher::LocalRunResult on = bench::run_job(job, o, "overlap-on");
  job.schedule.overlap = false;
  const launcher::LocalRunResult off = bench::run_job(job, o, "overlap-off");

  const double compute = bench::compute_s(on);
  const double communication = 2 * m * (message_bytes * 8 / (gbps * 1e9) + kLatencyS);
  const double bound = std::max(compute, communication);
  const double t_on = *on.measured_iteration_s, t_off = *off.measured_iteration_s;
  std::printf(
      "overlap_bench: 2 stages x 1 replica, %s, %d micro-batches of 8 x 256 tokens, "
      "hidden 64, %d steps (median after the first)\n",
      setup.schedule.c_str(), m, o.steps);
  std::printf("compute: %.1f ms per micro-batch on the slower stage (measured on a fast link)\n",
              stage_s * 1e3);
  std::printf(
      "link between the stages: %.1f Mbit/s, %.0f ms latency: %.1f ms per %.0f KB "
      "message (ratio %.2f)\n\n",
      gbps * 1e3, kLatencyS * 1e3, transfer_s * 1e3, message_bytes / 1e3, setup.ratio);
  std::printf("              iteration  predicted  compute  communication  iteration/max\n");
  std::printf("overlap on    %7.3f s  %7.3f s  %5.3f s  %11.3f s  %11.2f\n", t_on,
              on.plan.simulation.iteration_s, compute, communication, t_on / bound);
  std::printf("overlap off   %7.3f s  %7.3f s  %5.3f s\n\n", t_off, off.plan.simulation.iteration_s,
              bench::compute_s(off));
  const bool near_bound = t_on <= 1.15 * bound;
  const bool faster = t_off / t_on >= 1.4;
  std::printf("with overlap: %.2f x max(compute, communication) (goal <= 1.15): %s\n", t_on / bound,
              near_bound ? "met" : "NOT met");
  std::printf("speed-up from overlap: %.2fx (goal >= 1.4x): %s\n", t_off / t_on,
              faster ? "met" : "NOT met");
  bench::finish_scratch(o);
  return near_bound && faster ? 0 : 1;
}
