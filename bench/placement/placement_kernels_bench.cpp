// bench/placement: the speed of the placement search's inner pieces on this machine: the
// bottleneck matching (per call), the open path and cycle over the coarsened graph (Held-Karp up
// to g = 16, the local search above), and the synthetic geo generator at 1024 devices. These were
// printed by unit tests before; what a machine does per second is measured here, never asserted.
// Prints a markdown table; recorded results in placement_kernels_results.md beside it.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "placement/bottleneck_matching.h"
#include "placement/open_path.h"
#include "placement/topology_generate.h"

using namespace tessel::placement;

namespace {

volatile double g_sink = 0;  // keeps the measured work from being optimised away

// Microseconds per call of `body` over `calls` calls.
double microseconds_per_call(int calls, const std::function<double(int)>& body) {
  double sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) sink += body(i);
  const std::chrono::duration<double, std::micro> elapsed =
      std::chrono::steady_clock::now() - start;
  g_sink = sink;
  return elapsed.count() / calls;
}

std::vector<double> random_matrix(int n, std::mt19937& rng) {
  std::uniform_real_distribution<double> weight(0.1, 10.0);
  std::vector<double> w(n * n);
  for (double& x : w) x = weight(rng);
  return w;
}

std::vector<double> random_symmetric(int g, std::mt19937& rng) {
  std::uniform_real_distribution<double> weight(0.01, 2.0);
  std::vector<double> h(g * g, 0.0);
  for (int a = 0; a < g; ++a) {
    for (int b = a + 1; b < g; ++b) h[a * g + b] = h[b * g + a] = weight(rng);
  }
  return h;
}

void matching(int n, int calls) {
  std::mt19937 rng(99);
  std::vector<std::vector<double>> matrices;
  for (int i = 0; i < 64; ++i) matrices.push_back(random_matrix(n, rng));
  BottleneckWorkspace ws;
  const double us = microseconds_per_call(calls, [&](int i) {
    return bottleneck_matching_value(matrices[i % matrices.size()].data(), n, ws);
  });
  std::printf("| bottleneck_matching_value | n = %d | %.3f |\n", n, us);
}

void path(int g, bool cycle, int calls) {
  std::mt19937 rng(8 + g);
  const std::vector<double> h = random_symmetric(g, rng);
  OpenPathWorkspace ws;
  const double us = microseconds_per_call(calls, [&](int) {
    return cycle ? shortest_cycle(h.data(), g, ws).length
                 : shortest_open_path(h.data(), g, ws).length;
  });
  std::printf("| %s | g = %d%s | %.2f |\n", cycle ? "shortest_cycle" : "shortest_open_path", g,
              g > 16 ? " (local search)" : "", us);
}

void geo(int devices, int sites, int calls) {
  const double us = microseconds_per_call(calls, [&](int i) {
    const GeoTopologySpec spec{
        .devices = devices, .sites = sites, .seed = static_cast<uint64_t>(3 + i)};
    return static_cast<double>(generate_geo_topology(spec).size());
  });
  std::printf("| generate_geo_topology | %d devices, %d sites | %.0f |\n", devices, sites, us);
}

}  // namespace

int main() {
  std::printf("| function | size | us per call |\n|---|---|---|\n");
  matching(8, 200000);
  matching(32, 20000);
  path(8, false, 20000);
  path(16, false, 20);
  path(32, false, 20);
  path(8, true, 20000);
  path(16, true, 20);
  geo(1024, 32, 5);
  return 0;
}
