// tessel schedule: a pipeline schedule as the runtime runs it: every rank's instruction list,
// the multi-rank replay's verdict (no deadlock, sends matched), and optionally a picture of one
// iteration with uniform compute times.
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/commands.h"
#include "cli/validators.h"
#include "placement/atomic_file.h"
#include "placement/limits.h"
#include "placement/schedule.h"
#include "placement/simulator.h"
#include "placement/timeline_svg.h"

namespace tessel::cli {
namespace {

using namespace tessel::placement;

struct ScheduleCommand {
  std::string kind = "1f1b";
  ScheduleSpec spec;
  double forward_ms = 10;
  double backward_ms = 20;
  bool quiet = false;
  std::string svg_file;

  void run() {
    spec.kind = parse_schedule_kind(kind);
    if (spec.kind != ScheduleKind::Interleaved) spec.chunks = 1;
    // Each flag is bounded by its validator; their product bounds the lists' memory.
    const int64_t cells = int64_t{spec.stages} * spec.micro_batches * spec.chunks;
    if (cells > kMaxScheduleCells) {
      throw std::invalid_argument(
          "--stages " + std::to_string(spec.stages) + " x --micro-batches " +
          std::to_string(spec.micro_batches) + " x --chunks " + std::to_string(spec.chunks) +
          " = " + std::to_string(cells) + " (rank, micro-batch, chunk) cells, more than the " +
          "limit of " + std::to_string(kMaxScheduleCells) + " (about " +
          format_bytes(double(kMaxScheduleCells * kScheduleBytesPerCell)) +
          " of instruction lists)");
    }
    const auto lists = generate_schedule(spec);  // validates the spec
    if (!quiet) {
      for (size_t r = 0; r < lists.size(); ++r) {
        std::printf("rank %zu:", r);
        for (const Instruction& in : lists[r]) std::printf(" %s;", to_string(in).c_str());
        std::printf("\n");
      }
    }
    const ReplayReport report = replay_schedule(spec, lists);
    if (!report.ok()) {
      for (const std::string& e : report.errors) std::fprintf(stderr, "replay: %s\n", e.c_str());
      throw std::runtime_error("the schedule does not replay cleanly");
    }
    // Every rank computes at the same speed; communication takes no time.
    PipelineTiming timing;
    timing.stages.assign(spec.stages, StageTiming{forward_ms / 1e3, backward_ms / 1e3, 0, 0});
    timing.hops.assign(spec.stages, HopTiming{});
    const SimulationResult sim = simulate_iteration(spec, timing);
    std::printf(
        "%s, p=%d, m=%d%s: replay clean (no deadlock, every send received); "
        "iteration %.0f ms, bubble %.1f%%\n",
        to_string(spec.kind), spec.stages, spec.micro_batches,
        spec.kind == ScheduleKind::Interleaved ? (", v=" + std::to_string(spec.chunks)).c_str()
                                               : "",
        sim.iteration_s * 1e3, 100 * sim.bubble_fraction);
    if (svg_file.empty()) return;
    TimelineSvgOptions options;
    options.title = std::string(to_string(spec.kind)) + ": p=" + std::to_string(spec.stages) +
                    ", m=" + std::to_string(spec.micro_batches) +
                    (spec.kind == ScheduleKind::Interleaved ? ", v=" + std::to_string(spec.chunks)
                                                            : std::string()) +
                    "; forward " + std::to_string(int(forward_ms)) + " ms, backward " +
                    std::to_string(int(backward_ms)) + " ms per micro-batch and stage";
    write_file_atomically(svg_file, timeline_svg(sim, options));
    std::printf("picture: %s\n", svg_file.c_str());
  }
};

}  // namespace

void add_schedule_command(CLI::App& app) {
  auto cmd = std::make_shared<ScheduleCommand>();
  CLI::App* sub = app.add_subcommand(
      "schedule", "Print a pipeline schedule's instruction lists, check them, draw an iteration");
  sub->add_option("--kind", cmd->kind, "gpipe, 1f1b or interleaved")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved"}));
  sub->add_option("--stages", cmd->spec.stages, "Pipeline ranks p")
      ->check(count_in(1, kMaxStages, "every stage needs a layer; the layer limit"));
  sub->add_option("--micro-batches", cmd->spec.micro_batches, "Micro-batches per iteration m")
      ->check(count_in(1, kMaxMicroBatches));
  sub->add_option("--chunks", cmd->spec.chunks, "Model chunks per rank v (interleaved)")
      ->check(count_in(1, kMaxChunks));
  sub->add_option("--microbatch-group", cmd->spec.microbatch_group,
                  "Interleaved: micro-batches per chunk before switching (0: p)")
      ->check(count_in(0, kMaxMicroBatches, "0: p"));
  sub->add_option("--forward-ms", cmd->forward_ms, "Forward time per micro-batch and stage")
      ->check(number_in(0, kMaxComputeMs, true, "ms"));
  sub->add_option("--backward-ms", cmd->backward_ms, "Backward time per micro-batch and stage")
      ->check(number_in(0, kMaxComputeMs, true, "ms"));
  sub->add_flag("--quiet", cmd->quiet, "Leave out the instruction lists");
  sub->add_option("--svg", cmd->svg_file, "Draw one iteration as an SVG timeline");
  sub->callback([cmd] { cmd->run(); });
}

}  // namespace tessel::cli
