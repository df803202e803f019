// tessel simulate: replay one iteration of a placement event by event, next to the closed
// form the planner uses, and optionally write its timeline as a Chrome trace.
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/plan_data_parallel.h"
#include "cli/plan_options.h"
#include "cli/search_run.h"
#include "placement/atomic_file.h"
#include "placement/chrome_trace.h"
#include "placement/iteration_model.h"
#include "placement/outer_sync_cost.h"
#include "placement/placement.h"
#include "placement/simulator.h"
#include "placement/timeline_svg.h"

namespace tessel::cli {
namespace {

using namespace tessel::placement;

struct SimulateCommand {
  PlanOptions options;
  std::string placement_file;
  std::string trace_file;
  std::string svg_file;

  // The placement to simulate: read from --placement and checked as `tessel local` checks it
  // (placement::check_placement), else planned here.
  std::vector<std::vector<int>> pipelines(const PlanInputs& in) const {
    if (placement_file.empty()) {
      const SearchResult result = run_search(in, "tessel simulate", false);
      return build_placement(in.topology, in.objective(), *in.full, result, in.search).pipelines;
    }
    const Placement p = read_placement_file(placement_file);
    check_placement(p, in.topology, in.shape, in.workload.layers, placement_file);
    return p.pipelines;
  }

  void run() const {
    const PlanInputs in = load_plan_inputs(options);
    std::vector<int> split;
    const std::vector<std::vector<int>> layout = pipelines(in);
    const PipelineTiming timing = in.full->pipeline_timing(layout, &split);
    const ScheduleSpec& spec = in.full->schedule();
    const double predicted = predict_iteration_s(spec, timing);
    const SimulationResult sim = simulate_iteration(spec, timing);

    std::printf("schedule %s, %d stages x %d replicas, %d micro-batches per replica%s\n",
                to_string(spec.kind), spec.stages, in.shape.replicas, spec.micro_batches,
                timing.overlap ? ", communication overlapped" : ", communication blocking");
    const OuterSyncTiming& outer = timing.outer_sync;
    const bool low_communication = outer.sync_every > 0;
    std::printf("\nstage  layers  forward/mb  backward/mb  all-reduce  busy      net wait%s\n",
                low_communication ? "  delta exchange" : "");
    for (int s = 0; s < spec.stages; ++s) {
      std::printf("%5d  %6d  %8.2f ms  %9.2f ms  %8.3f s  %7.3f s  %7.3f s", s, split[s],
                  timing.stages[s].forward_s * 1e3, timing.stages[s].backward_s * 1e3,
                  timing.stages[s].allreduce_s, sim.compute_busy_s[s], sim.network_wait_s[s]);
      if (low_communication) std::printf("  %12.3f s", timing.stages[s].delta_exchange_s);
      std::printf("\n");
    }
    if (spec.stages > 1) {
      std::printf(
          "\ntied token table: first and last stage sum it in %.3f s, then all-reduce "
          "it in %.3f s (stage 0) and %.3f s (stage %d)\n",
          timing.embedding_allreduce_s, timing.stages[0].table_allreduce_s,
          timing.stages[spec.stages - 1].table_allreduce_s, spec.stages - 1);
    }
    if (!timing.hops.empty()) {
      std::printf("\nhop      latency    transfer/message\n");
      for (size_t h = 0; h < timing.hops.size(); ++h)
        std::printf("%d->%-4d %7.1f ms  %9.2f ms\n", int(h), int((h + 1) % spec.stages),
                    timing.hops[h].latency_s * 1e3, timing.hops[h].transfer_s * 1e3);
    }
    std::printf("\niteration: simulated %.4f s, closed form %.4f s (%+.2f%%), bubble %.1f%%\n",
                sim.iteration_s, predicted, 100.0 * (predicted - sim.iteration_s) / sim.iteration_s,
                100.0 * sim.bubble_fraction);
    if (low_communication) {
      // H as priced: given, or chosen by the cost model for this layout.
      const DataParallelChoice planned =
          choose_data_parallel(in.workload.data_parallel, spec, timing);
      const DataParallelMode& mode = planned.mode;
      std::printf(
          "low-communication data parallelism: all-reduces inside each site every step; every "
          "%d steps each stage exchanges its %d-bit delta between sites (%s), vote %.3f s, "
          "outer step %.4f s: %.4f s of stall per sync; inner step simulated %.4f s, iteration "
          "amortised over the %d steps %.4f s (data-parallel communication %.4f s per step)\n",
          mode.sync_every, mode.delta_bits,
          mode.delayed ? "overlapping the next inner step" : "waited", outer.vote_s,
          outer.outer_step_s, sim.outer_stall_s, sim.step_s, mode.sync_every, sim.iteration_s,
          data_parallel_comm_per_step_s(timing));
      std::printf("%s", planned_data_parallel_text(planned).c_str());
    }
    if (!trace_file.empty()) {
      write_chrome_trace(sim, trace_file);
      std::printf("timeline: %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
                  trace_file.c_str());
    }
    if (!svg_file.empty()) {
      TimelineSvgOptions svg;
      svg.title = std::string("tessel simulate: ") + to_string(spec.kind) + ", " +
                  std::to_string(spec.stages) + " stages, " + std::to_string(spec.micro_batches) +
                  " micro-batches";
      write_file_atomically(svg_file, timeline_svg(sim, svg));
      std::printf("picture: %s\n", svg_file.c_str());
    }
  }
};

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto cmd = std::make_shared<SimulateCommand>();
  CLI::App* sub = app.add_subcommand(
      "simulate", "Simulate one iteration of a placement event by event (and its timeline)");
  cmd->options.add_to(*sub, true);
  sub->add_option("--placement", cmd->placement_file,
                  "A placement from `tessel plan --format json` (default: plan one now)")
      ->check(CLI::ExistingFile);
  sub->add_option("--trace", cmd->trace_file, "Write the timeline as Chrome-trace JSON");
  sub->add_option("--svg", cmd->svg_file, "Draw the timeline as an SVG picture");
  sub->callback([cmd] { cmd->run(); });
}

}  // namespace tessel::cli
