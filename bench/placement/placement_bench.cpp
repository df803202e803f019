// bench/placement: the placement search against its baselines on the paper's five scenarios
// (paper cost model, the reference code's c_dp = 0.65 GB and c_pp = 0.47125 GB, 5000
// evaluations each), and the convergence of the search on a synthetic 1024-GPU topology.
// Prints markdown tables; the recorded results are in docs/benchmarks.md.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "placement/paper_cost.h"
#include "placement/search.h"
#include "placement/topology_generate.h"

using namespace tessel::placement;

namespace {

const char* kScenarios[] = {"1-datacenter-on-demand.yaml", "2-datacenter-spot.yaml",
                            "3-multi-datacenter.yaml", "4-regional-geo.yaml",
                            "5-worldwide-geo.yaml"};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void scenarios(long evaluations, int seeds, int threads, long swaps) {
  std::printf(
      "| scenario | tessel GA (median of %d seeds) | best seed | GA without seeds (median) "
      "| KL | random best (mean) | ordered | one device per site | GA wall s (median) |\n",
      seeds);
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const char* file : kScenarios) {
    const Topology t =
        load_topology_file(std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/" + file);
    const PaperCostModel model(t, {8, 8}, {0.65, 0.47125});
    auto run = [&](Strategy s, uint64_t seed, bool structured = true) {
      SearchOptions o;
      o.structured_seeds = structured;
      o.strategy = s;
      o.evaluations = evaluations;
      o.seed = seed;
      o.threads = threads;
      o.swap_trials = swaps;
      return search_placement(model, o);
    };
    std::vector<double> ga, wall, kl, unseeded;
    for (int seed = 1; seed <= seeds; ++seed) {
      const SearchResult r = run(Strategy::Evolutionary, seed);
      ga.push_back(r.best_cost);
      wall.push_back(r.elapsed_s);
      kl.push_back(run(Strategy::KernighanLin, seed).best_cost);
      unseeded.push_back(run(Strategy::Evolutionary, seed, false).best_cost);
    }
    const SearchResult random = run(Strategy::Random, 1);
    const SearchResult ordered = run(Strategy::Ordered, 1);
    Groups spread(8);  // group k = devices {k, k+8, ..., k+56}
    for (int k = 0; k < 8; ++k)
      for (int i = 0; i < 8; ++i) spread[k].push_back(k + 8 * i);
    auto scratch = model.make_scratch();
    std::printf("| %s | %.4f | %.4f | %.4f | %.4f | %.4f (%.4f) | %.4f | %.4f | %.3f |\n", file,
                median(ga), *std::min_element(ga.begin(), ga.end()), median(unseeded), median(kl),
                random.best_cost, random.random_mean_cost, ordered.best_cost,
                model.cost(spread, *scratch), median(wall));
    std::fflush(stdout);
  }
}

void large(int devices, int stages, double short_s, double long_s, int threads, long swaps,
           bool seeds) {
  GeoTopologySpec spec;
  spec.devices = devices;
  spec.sites = 32;
  spec.seed = 2024;
  const Topology t = generate_geo_topology(spec);
  const PaperCostModel model(t, {stages, devices / stages}, {0.65, 0.47125});
  auto run = [&](double seconds) {
    SearchOptions o;
    o.evaluations = 0;
    o.time_limit_s = seconds;
    o.seed = 1;
    o.threads = threads;
    o.swap_trials = swaps;
    o.structured_seeds = seeds;
    return search_placement(model, o);
  };
  const SearchResult shorter = run(short_s);
  const SearchResult longer = run(long_s);
  std::printf("| run | evaluations | best cost | vs the %.0f s best |\n|---|---|---|---|\n",
              long_s);
  std::printf("| %.0f s | %ld | %.4f | %+.2f%% |\n", short_s, shorter.evaluations,
              shorter.best_cost, 100 * (shorter.best_cost / longer.best_cost - 1));
  std::printf("| %.0f s | %ld | %.4f | 0 |\n\n", long_s, longer.evaluations, longer.best_cost);
  std::printf("convergence of the %.0f s run (evaluations, best):\n", long_s);
  for (const auto& [e, c] : longer.convergence) std::printf("  %ld %.4f\n", e, c);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"placement benchmark"};
  long evaluations = 5000;
  int seeds = 5, threads = 0, devices = 1024, stages = 32;
  double short_s = 60, long_s = 600;
  bool run_large = false, skip_scenarios = false;
  long swaps = SearchOptions{}.swap_trials;
  bool no_seeds = false;
  app.add_flag("--no-seeds", no_seeds, "GA: random initial population only (as the paper)");
  app.add_option("--swap-trials", swaps, "GA: true-cost swaps tried per offspring");
  app.add_option("--evaluations", evaluations, "Budget per search on the scenarios");
  app.add_option("--seeds", seeds, "GA seeds per scenario");
  app.add_option("--threads", threads, "Worker threads (0: all cores)");
  app.add_flag("--large", run_large, "Also run the synthetic large-topology convergence");
  app.add_flag("--skip-scenarios", skip_scenarios, "Only the large run");
  app.add_option("--devices", devices, "Large run: GPUs");
  app.add_option("--stages", stages, "Large run: pipeline stages");
  app.add_option("--short", short_s, "Large run: the short budget, seconds");
  app.add_option("--long", long_s, "Large run: the long budget, seconds");
  CLI11_PARSE(app, argc, argv);
  if (!skip_scenarios) scenarios(evaluations, seeds, threads, swaps);
  if (run_large) large(devices, stages, short_s, long_s, threads, swaps, !no_seeds);
  return 0;
}
