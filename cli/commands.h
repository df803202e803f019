// The subcommands of `tessel`: each registers its options on the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>

namespace tessel::cli {

void add_plan_command(CLI::App& app);
void add_schedule_command(CLI::App& app);
void add_local_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_topology_command(CLI::App& app);

}  // namespace tessel::cli
