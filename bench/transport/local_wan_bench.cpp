// bench/transport: a `tessel local` job whose stages cross a long link, measured against the
// simulator's prediction (issue 20), with the link made two ways side by side:
// - user space: what `tessel local` does by default, every rank on loopback and each link
//   shaped inside the transport (a rate and a delay per message; the kernel's TCP sees no RTT);
// - kernel: the WAN emulator (tests/support/wan) makes one network namespace per site of the
//   job's topology and joins them with the topology's links (one-way delay, rate), so the
//   kernel's TCP sees the real round trip; each rank runs in its site's namespace (`ip netns
//   exec`), nothing is shaped in user space, and the topology's bandwidth sizes each link's
//   TCP streams with the RTT the kernel measured (stream_plan.h). The launcher itself runs in
//   one more namespace, the hub's site, joined to every site by an unshaped link, where the
//   ranks reach its rendezvous and progress servers.
// For each round trip (--rtt-ms; every inter-site link of the job's topology gets RTT/2 one
// way), or once with the topology's own links (--link-mix), it prints the measured iteration (the mean step time after the first, over --steps) and
// the simulator's prediction for the run's placement (what `tessel local` prints), and the
// streams of the cross-site link. Both runs of one round trip train the same steps from the
// same seed: their losses must agree (else exit 1). Ranks of one site share a namespace, whose
// traffic inside is not shaped (the topology's intra-site link is not emulated).
// Needs root and /dev/net/tun; without them it says why and exits 77 (skipped).
// Usage: local_wan_bench [--job examples/local/fables-wan.yaml] [--rtt-ms 0,150] [--steps 12]
//        [--link-mix] [--stage-binary PATH] [--keep] [--kernel-only] [--trace] [--without-warmup]
//        [--sysctl key=value (in the sites' namespaces; repeatable)]
// Recorded results: bench/transport/results.md.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "noderuntime/launcher/launcher.h"
#include "placement/atomic_file.h"
#include "placement/limits.h"
#include "placement/topology.h"
#include "tests/support/wan/wan_emulator.h"

namespace fs = std::filesystem;
namespace launcher = tessel::launcher;
namespace placement = tessel::placement;
namespace wan = tessel::wan;

namespace {

// Losses of two runs of the same steps agree to this relative difference (the arithmetic is
// the same; only the transport under it differs).
constexpr double kLossTolerance = 1e-5;

struct Options {
  std::string job = TESSEL_SOURCE_DIR "/examples/local/fables-wan.yaml";
  std::vector<double> rtt_ms{0, 150};
  // Run once with the topology's own links (each site pair its latency and bandwidth) instead
  // of one round trip for all of them.
  bool link_mix = false;
  int steps = 12;
  std::string stage_binary;
  bool keep = false;
  bool kernel_only = false;
  // key=value, set with sysctl in every site's namespace before its ranks start (e.g.
  // net.ipv4.tcp_congestion_control=cubic)
  std::vector<std::string> sysctls;
  bool trace = false;
  // Also run the kernel's path without the transport's warm-up of long links (link_warmup.h),
  // side by side.
  bool without_warmup = false;
};

struct Row {
  std::string round_trip;  // "150 ms", or "the topology's" for --link-mix
  std::string links;
  launcher::LocalRunResult result;
  double mean_step_s = 0;  // after the first
  std::string streams;     // the cross-site link's streams, as the connecting rank said them
};

// The job's topology with every inter-site link's one-way latency set to rtt_ms / 2, written
// beside the runs; the job points at it.
launcher::LocalJob with_rtt(launcher::LocalJob job, double rtt_ms, const fs::path& dir) {
  placement::Topology topology = placement::load_topology_file(job.topology.file);
  if (!topology.inter_site_default) {
    throw std::runtime_error(job.topology.file + ": needs network.inter_site_default");
  }
  topology.inter_site_default->latency_ms = rtt_ms / 2;
  for (placement::SitePair& pair : topology.site_pairs) pair.link.latency_ms = rtt_ms / 2;
  topology.finalize(job.topology.file);
  const fs::path path = dir / ("topology-rtt" + std::to_string(static_cast<int>(rtt_ms)) + ".yaml");
  placement::write_file_atomically(path.string(), placement::topology_to_yaml(topology));
  job.topology.file = path.string();
  return job;
}

// The emulator's namespaces: one per site of the topology, then the hub's; the links between
// sites as the topology's (the capacity, not the TCP-bound rate), the hub's unshaped.
wan::WanConfig emulator_config(const placement::Topology& topology) {
  placement::Topology capacity = topology;
  capacity.tcp.reset();
  capacity.finalize();
  const size_t sites = topology.sites.size();
  wan::WanConfig config;
  config.namespaces = sites + 1;
  std::vector<int> device_of_site(sites, -1);
  for (const placement::Device& d : topology.devices) {
    device_of_site[topology.site_index(d.site)] = d.id;
  }
  for (size_t a = 0; a < sites; ++a) {
    for (size_t b = a + 1; b < sites; ++b) {
      if (device_of_site[a] < 0 || device_of_site[b] < 0) continue;
      wan::LinkOverride link;
      link.from = a;
      link.to = b;
      link.delay_ms = capacity.latency_ms(device_of_site[a], device_of_site[b]);
      link.rate_mbit = capacity.bandwidth_gbps(device_of_site[a], device_of_site[b]) * 1e3;
      config.links.push_back(link);
    }
  }
  return config;
}

// Every device runs in its site's namespace; the launcher's servers in the hub's.
launcher::LocalNetwork emulated_network(const placement::Topology& topology,
                                        const wan::WanEmulator& emulator) {
  launcher::LocalNetwork network;
  network.server_host = emulator.address(emulator.size() - 1);
  network.shape_links = false;
  for (const placement::Device& d : topology.devices) {
    const size_t site = static_cast<size_t>(topology.site_index(d.site));
    network.devices.push_back(
        {emulator.address(site), {"ip", "netns", "exec", emulator.namespace_name(site)}});
  }
  return network;
}

// The lines each rank's transport said about its links (streams, buffers, measured RTT).
std::string stream_lines(const launcher::LocalRunResult& result) {
  std::string lines;
  for (const auto& entry : fs::directory_iterator(fs::path(result.output_dir) / "logs")) {
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find("tessel transport: ");
      if (at != std::string::npos) lines += "    " + line.substr(at) + "\n";
    }
  }
  return lines.empty() ? "    (one stream per link, buffers autotuned)\n" : lines;
}

Row run(const launcher::LocalJob& job, const Options& o, const fs::path& dir,
        const std::string& round_trip,
        const std::string& links, const launcher::LocalNetwork& network) {
  launcher::LocalRunOptions options;
  options.output_dir = dir.string();
  options.stage_binary = o.stage_binary;
  options.steps = o.steps;
  options.out = nullptr;
  options.grace_s = 10;
  options.trace = o.trace;
  options.network = network;
  std::fprintf(stderr, "  running %s ...\n", dir.filename().c_str());
  Row row{round_trip, links, launcher::run_local_job(job, options), 0, ""};
  if (row.result.status != launcher::RunStatus::kDone || row.result.steps.size() < 2) {
    throw std::runtime_error(dir.string() + ": the run did not finish: " + row.result.message);
  }
  double sum = 0;
  for (size_t i = 1; i < row.result.steps.size(); ++i) sum += row.result.steps[i].step_s;
  row.mean_step_s = sum / static_cast<double>(row.result.steps.size() - 1);
  row.streams = stream_lines(row.result);
  return row;
}

// Empty when the two runs' losses agree step by step; else what differs.
std::string loss_difference(const Row& a, const Row& b) {
  if (a.result.steps.size() != b.result.steps.size()) {
    return std::to_string(a.result.steps.size()) + " steps vs " +
           std::to_string(b.result.steps.size());
  }
  for (size_t i = 0; i < a.result.steps.size(); ++i) {
    const double x = a.result.steps[i].loss, y = b.result.steps[i].loss;
    if (std::abs(x - y) > kLossTolerance * std::max(std::abs(x), std::abs(y))) {
      char text[128];
      std::snprintf(text, sizeof text, "step %lld: loss %.6f (%s) vs %.6f (%s)",
                    static_cast<long long>(a.result.steps[i].step), x, a.links.c_str(), y,
                    b.links.c_str());
      return text;
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "tessel local over a long link: user-space shaping vs the kernel's TCP through "
      "the WAN emulator, measured vs predicted"};
  app.add_option("--job", o.job, "the local job file (two sites or more)");
  app.add_option("--rtt-ms", o.rtt_ms, "round trips of the inter-site links")->delimiter(',');
  app.add_flag("--link-mix", o.link_mix,
               "one run with the topology's own inter-site links instead (--rtt-ms ignored)");
  app.add_option("--steps", o.steps, "steps per run (>= 2; the first is left out)")
      ->check(CLI::Range(2, 100000));
  app.add_option("--stage-binary", o.stage_binary,
                 "tessel-stage (default: found as tessel local "
                 "finds it)");
  app.add_flag("--keep", o.keep, "keep the run folders (reports, logs)");
  app.add_flag("--kernel-only", o.kernel_only, "skip the user-space runs");
  app.add_option("--sysctl", o.sysctls,
                 "key=value set in every site's namespace (repeatable), e.g. "
                 "net.ipv4.tcp_congestion_control=cubic");
  app.add_flag("--trace", o.trace, "write each run's trace.json (with --keep)");
  app.add_flag("--without-warmup", o.without_warmup,
               "also run the kernel's path with links.warmup false (no warm-up of long links)");
  CLI11_PARSE(app, argc, argv);
  for (const std::string& sysctl : o.sysctls) {
    if (sysctl.find('=') == std::string::npos || sysctl.find('\'') != std::string::npos) {
      std::fprintf(stderr, "--sysctl %s: expected key=value (no quotes)\n", sysctl.c_str());
      return 2;
    }
  }

  char pattern[] = "/tmp/tessel-local-wan-XXXXXX";
  if (!mkdtemp(pattern)) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path scratch = pattern;
  int status = 0;
  std::vector<Row> rows;
  std::string congestion_control;  // in the sites' namespaces
  try {
    const launcher::LocalJob job = launcher::load_local_job(o.job);
    std::vector<std::pair<std::string, launcher::LocalJob>> variants;  // round trip, job
    if (o.link_mix) {
      variants.emplace_back("the topology's", job);
    } else {
      for (const double rtt : o.rtt_ms) {
        variants.emplace_back(placement::number_text(rtt) + " ms", with_rtt(job, rtt, scratch));
      }
    }
    for (size_t v = 0; v < variants.size(); ++v) {
      const auto& [round_trip, variant] = variants[v];
      const placement::Topology topology = placement::load_topology_file(variant.topology.file);
      std::unique_ptr<wan::WanEmulator> emulator;
      try {
        emulator = wan::WanEmulator::start(emulator_config(topology));
      } catch (const wan::WanUnavailable& e) {
        std::printf("local_wan_bench: skipped: %s\n", e.what());
        fs::remove_all(scratch);
        return 77;
      }
      const std::string name = "run" + std::to_string(v);
      const size_t first = rows.size();  // this round trip's runs, which train the same steps
      if (!o.kernel_only) {
        rows.push_back(run(variant, o, scratch / (name + "-user-space"), round_trip, "user space", {}));
      }
      for (size_t site = 0; site + 1 < emulator->size(); ++site) {
        for (const std::string& sysctl : o.sysctls) {
          std::string output;
          if (emulator->run_in(site, "sysctl -qw '" + sysctl + "'", output) != 0) {
            throw std::runtime_error("--sysctl " + sysctl + ": " + output);
          }
        }
      }
      emulator->run_in(0, "sysctl -n net.ipv4.tcp_congestion_control", congestion_control);
      const launcher::LocalNetwork network = emulated_network(topology, *emulator);
      if (o.without_warmup) {
        launcher::LocalNetwork cold = network;
        cold.warm_up_links = false;
        Row row;
        emulator->call_in(emulator->size() - 1, [&] {
          row = run(variant, o, scratch / (name + "-kernel-no-warmup"), round_trip,
                    "kernel (emulator), no warm-up", cold);
        });
        rows.push_back(std::move(row));
      }
      Row kernel;
      emulator->call_in(emulator->size() - 1, [&] {
        kernel = run(variant, o, scratch / (name + "-kernel"), round_trip, "kernel (emulator)", network);
      });
      rows.push_back(std::move(kernel));
      for (size_t i = first + 1; i < rows.size(); ++i) {
        const std::string difference = loss_difference(rows[first], rows[i]);
        if (!difference.empty()) {
          std::fprintf(stderr, "local_wan_bench: RTT %s: the losses differ: %s\n",
                       round_trip.c_str(), difference.c_str());
          status = 1;
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "local_wan_bench: %s\n", e.what());
    std::fprintf(stderr, "run folders: %s\n", scratch.c_str());
    return 1;
  }

  std::printf(
      "\n%s, %d steps per run (measured: mean step after the first); kernel runs: "
      "congestion control %s",
      o.job.c_str(), o.steps, congestion_control.substr(0, congestion_control.find('\n')).c_str());
  for (const std::string& sysctl : o.sysctls) std::printf(", %s", sysctl.c_str());
  std::printf("\n\n");
  std::printf(
      "| RTT | links | measured s | median s | predicted s | error | loss first -> last |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    const double predicted = row.result.plan.simulation.iteration_s;
    const double median = row.result.measured_iteration_s.value_or(0);
    std::printf("| %s | %s | %.3f | %.3f | %.3f | %+.1f%% | %.4f -> %.4f |\n", row.round_trip.c_str(),
                row.links.c_str(), row.mean_step_s, median, predicted,
                100 * (predicted - row.mean_step_s) / row.mean_step_s,
                row.result.steps.front().loss, row.result.steps.back().loss);
  }
  std::printf("\nstreams (each rank's transport):\n");
  for (const Row& row : rows) {
    std::printf("  RTT %s, %s:\n%s", row.round_trip.c_str(), row.links.c_str(), row.streams.c_str());
  }
  if (o.keep) {
    std::printf("\nrun folders (reports, logs): %s\n", scratch.c_str());
  } else {
    fs::remove_all(scratch);
  }
  return status;
}
