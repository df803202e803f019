// tessel plan: the placement of stages x replicas on the GPUs of a topology.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/commands.h"
#include "cli/plan_options.h"
#include "placement/atomic_file.h"
#include "placement/placement.h"

namespace tessel::cli {
namespace {

using namespace tessel::placement;

struct PlanCommand {
  PlanOptions options;
  std::string format = "table";
  std::string output;

  void run() const {
    PlanInputs in = load_plan_inputs(options);
    if (isatty(STDERR_FILENO)) {
      // A progress line, at most ten updates a second.
      auto last = std::make_shared<std::chrono::steady_clock::time_point>();
      in.search.progress = [last](const SearchProgress& p) {
        const auto now = std::chrono::steady_clock::now();
        if (now - *last < std::chrono::milliseconds(100)) return;
        *last = now;
        std::fprintf(stderr, "\rtessel plan: %ld evaluations, best %.4f s, %.1f s elapsed   ",
                     p.evaluations, p.best_cost, p.elapsed_s);
      };
    }
    const SearchResult result = search_placement(in.objective(), in.search);
    if (in.search.progress) std::fprintf(stderr, "\r\033[K");
    const Placement placement =
        build_placement(in.topology, in.objective(), *in.full, result, in.search);
    std::string text;
    if (format == "json")
      text = placement_to_json(placement).dump(2) + "\n";
    else if (format == "yaml")
      text = placement_to_yaml(placement);
    else
      text = placement_to_table(placement, in.topology);
    if (output.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      return;
    }
    write_file_atomically(output, text);
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
