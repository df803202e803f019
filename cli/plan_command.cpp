// tessel plan: the placement of stages x replicas on the GPUs of a topology.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/plan_comparison.h"
#include "cli/plan_data_parallel.h"
#include "cli/plan_options.h"
#include "cli/search_run.h"
#include "placement/atomic_file.h"
#include "placement/placement.h"

namespace tessel::cli {
namespace {

using namespace tessel::placement;

// The exit code of a plan stopped by Ctrl-C (the placement found so far is printed).
constexpr int kInterruptedExitCode = 130;

struct PlanCommand {
  PlanOptions options;
  std::string format = "table";
  std::string output;

  void run() const {
    PlanInputs in = load_plan_inputs(options);
    const SearchResult result = run_search(in, "tessel plan", true);
    const Placement placement =
        build_placement(in.topology, in.objective(), *in.full, result, in.search);
    // The low-communication mode: H and the bits as priced for this layout, and why.
    std::optional<DataParallelChoice> data_parallel;
    if (in.workload.data_parallel.low_communication())
      data_parallel = choose_data_parallel(in.workload.data_parallel, in.full->schedule(),
                                           in.full->pipeline_timing(placement.pipelines));
    std::string text;
    if (format == "json") {
      nlohmann::json j = placement_to_json(placement);
      if (data_parallel) j["data_parallel"] = planned_data_parallel_json(*data_parallel);
      text = j.dump(2) + "\n";
    } else if (format == "yaml") {
      text = placement_to_yaml(placement);
      if (data_parallel) text += planned_data_parallel_yaml(*data_parallel);
    } else {
      text = placement_to_table(placement, in.topology);
      if (data_parallel) text += planned_data_parallel_text(*data_parallel);
    }
    // The mode against synchronous data parallelism, each with its own layout (table only).
    if (format == "table" && !result.interrupted && data_parallel)
      text += data_parallel_comparison(options, in, placement, data_parallel->mode, "tessel plan");
    if (output.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    } else {
      write_file_atomically(output, text);
    }
    if (result.interrupted) {
      // Stopped by Ctrl-C: the best placement so far is out; say so, and exit 130 (128 + SIGINT,
      // as a shell reports a command ended by Ctrl-C) so that scripts see it was cut short.
      const std::string budget =
          in.search.evaluations > 0 ? " of " + std::to_string(in.search.evaluations) : "";
      const std::string where = output.empty() ? "printed above" : "written to " + output;
      std::fprintf(stderr,
                   "tessel plan: interrupted after %ld%s evaluations (%.1f s); the best placement "
                   "found so far (cost %.6g s) is %s\n",
                   result.evaluations, budget.c_str(), result.elapsed_s, result.best_cost,
                   where.c_str());
      throw CLI::RuntimeError(kInterruptedExitCode);
    }
  }
};

}  // namespace

void add_plan_command(CLI::App& app) {
  auto cmd = std::make_shared<PlanCommand>();
  CLI::App* sub =
      app.add_subcommand("plan", "Place pipeline stages x data-parallel replicas on GPUs");
  cmd->options.add_to(*sub, true);
  sub->add_option("--format", cmd->format, "table (default), json or yaml")
      ->check(CLI::IsMember({"table", "json", "yaml"}));
  sub->add_option("--output", cmd->output, "Write to this file instead of standard output");
  sub->callback([cmd] { cmd->run(); });
}

}  // namespace tessel::cli
