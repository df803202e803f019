// tessel topology generate: synthetic geo-distributed topologies, seeded.
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/commands.h"
#include "cli/validators.h"
#include "placement/atomic_file.h"
#include "placement/limits.h"
#include "placement/topology_generate.h"

namespace tessel::cli {
namespace {

using namespace tessel::placement;

struct GenerateCommand {
  GeoTopologySpec spec;
  bool single_gpu_model = false;
  std::string output;

  void run() {
    spec.mixed_gpus = !single_gpu_model;
    const std::string text = topology_to_yaml(generate_geo_topology(spec));
    if (output.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      return;
    }
    write_file_atomically(output, text);
  }
};

}  // namespace

void add_topology_command(CLI::App& app) {
  CLI::App* topo = app.add_subcommand("topology", "Work with topology files");
  topo->require_subcommand(1);
  auto cmd = std::make_shared<GenerateCommand>();
  CLI::App* gen = topo->add_subcommand("generate", "Generate a synthetic geo-distributed topology");
  gen->add_option("--devices", cmd->spec.devices, "GPUs in all")
      ->check(count_in(1, kMaxDevices, "the topology device limit"));
  gen->add_option("--sites", cmd->spec.sites, "Sites (regions) the GPUs are spread over")
      ->check(count_in(1, kMaxSites, "the topology site limit"));
  gen->add_option("--seed", cmd->spec.seed, "Random seed: the same seed gives the same topology")
      ->check(seed_value());
  // A link's physical bounds: 1 kbit/s to 100 Tbit/s, 0 to one minute.
  const CLI::Validator bandwidth =
      number_in(kMinBandwidthGbps, kMaxBandwidthGbps, false, "Gbit/s (1 kbit/s to 100 Tbit/s)");
  gen->add_option("--min-bandwidth", cmd->spec.min_bandwidth_gbps, "Slowest inter-site Gbit/s")
      ->check(bandwidth);
  gen->add_option("--max-bandwidth", cmd->spec.max_bandwidth_gbps, "Fastest inter-site Gbit/s")
      ->check(bandwidth);
  gen->add_option("--intra-site-bandwidth", cmd->spec.intra_site_bandwidth_gbps,
                  "Gbit/s between GPUs of one site")
      ->check(bandwidth);
  gen->add_option("--intra-site-latency", cmd->spec.intra_site_latency_ms,
                  "ms between GPUs of one site")
      ->check(number_in(0, kMaxLatencyMs, false, "ms (0 to one minute)"));
  gen->add_flag("--single-gpu-model", cmd->single_gpu_model, "All GPUs of one model (no mix)");
  gen->add_option("--output", cmd->output, "Write to this file instead of standard output");
  gen->callback([cmd] { cmd->run(); });
}

}  // namespace tessel::cli
