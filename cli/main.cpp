// tessel: plan, simulate and (later) run GPT training over geo-distributed GPUs.
#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"tessel: places and trains GPT models on GPUs scattered over slow, uneven links"};
  app.require_subcommand(1);
  tessel::cli::add_plan_command(app);
  tessel::cli::add_simulate_command(app);
  tessel::cli::add_local_command(app);
  tessel::cli::add_schedule_command(app);
  tessel::cli::add_topology_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessel: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
