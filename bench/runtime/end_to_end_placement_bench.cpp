// bench/runtime (b): placement matters end to end. A scaled-down world-wide network (four
// regions of the paper's world-wide scenario, two devices each: worldwide-4x2.yaml) emulated
// on this machine; the same job (4 stages x 2 replicas of a small GPT) runs once per
// placement: the evolutionary search's, the ordered one (stage groups of consecutive devices)
// and a few random ones. For each, the measured iteration time (median over the steps after
// the first) against the prediction of the placement simulator (what `tessel simulate`
// prints for the run's topology.yaml and placement.json).
// Goals: the evolutionary placement is the fastest measured (a placement with the same stage
// groups is the same placement, marked "same"); every prediction within 20%.
//   end_to_end_placement_bench [--topology FILE] [--bandwidth-scale X] [--latency-scale X]
//   [--random N]
//                   [--steps N] [--stage-binary PATH] [--keep] [--trace]
// Run from the repository root (the default topology is bench/runtime/worldwide-4x2.yaml).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/runtime/local_bench_support.h"

namespace {

using namespace tessel;

struct Setup {
  std::string topology = "bench/runtime/worldwide-4x2.yaml";
  double bandwidth_scale = 0.05;
  double latency_scale = 0.01;
  int random = 3;
};

std::string job_yaml(const Setup& s, int steps) {
  return "name: placement\n"
         "topology: {file: " +
         std::filesystem::absolute(s.topology).string() +
         ", bandwidth_scale: " + std::to_string(s.bandwidth_scale) +
         ", latency_scale: " + std::to_string(s.latency_scale) +
         "}\n"
         "model: {layers: 8, hidden: 256, heads: 4, seq_len: 64}\n"
         "training: {steps: " +
         std::to_string(steps) +
         ", micro_batch: 2, global_batch: 8, learning_rate: 0.001}\n"
         "data: {synthetic: {seed: 3, bytes: 400000}}\n"
         "schedule: {kind: 1f1b}\n"
         "pipeline: {stages: 4, replicas: 2}\n"
         "timeouts: {io_s: 300}\n";
}

struct Row {
  std::string name;
  launcher::LocalRunResult result;
};

// Every stage's devices, sorted: two placements with the same groups are the same placement.
std::vector<std::vector<int>> stage_groups(const launcher::LocalRunResult& r) {
  std::vector<std::vector<int>> groups = r.plan.placement.stages;
  for (auto& group : groups) std::sort(group.begin(), group.end());
  return groups;
}

// "Oregon+Tokyo | Oregon+Tokyo | ..." : the sites of every stage's replicas.
std::string stage_sites(const launcher::LocalRunResult& r) {
  std::string text;
  for (const auto& devices : r.plan.placement.stages) {
    text += text.empty() ? "" : " | ";
    for (size_t i = 0; i < devices.size(); ++i) {
      text += (i ? "+" : "") + r.plan.topology.devices[devices[i]].site;
    }
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Setup setup;
  const bench::BenchOptions o =
      bench::parse_bench_options(argc, argv,
                                 "end_to_end_placement_bench [--topology FILE] [--bandwidth-scale "
                                 "X] [--latency-scale X] [--random N] "
                                 "[--steps N] [--stage-binary PATH] [--keep] [--trace]",
                                 [&](const std::string& arg, const char* value, int& i) {
                                   bool ok = false;
                                   if (arg == "--topology" && value)
                                     ok = !(setup.topology = value).empty();
                                   if (arg == "--bandwidth-scale" && value)
                                     ok = (setup.bandwidth_scale = std::atof(value)) > 0;
                                   if (arg == "--latency-scale" && value)
                                     ok = (setup.latency_scale = std::atof(value)) >= 0;
                                   if (arg == "--random" && value)
                                     ok = (setup.random = std::atoi(value)) >= 0;
                                   if (ok) ++i;
                                   return ok;
                                 });
  if (!std::filesystem::exists(setup.topology)) {
    std::fprintf(stderr,
                 "end_to_end_placement_bench: %s: no such topology (run from the repository root, "
                 "or give --topology)\n",
                 setup.topology.c_str());
    return 2;
  }
  const std::string job_path = (std::filesystem::path(o.scratch) / "job.yaml").string();
  std::ofstream(job_path) << job_yaml(setup, o.steps);
  launcher::LocalJob job = launcher::load_local_job(job_path);

  std::vector<Row> rows;
  job.placement.strategy = placement::Strategy::Evolutionary;
  rows.push_back({"evolutionary", bench::run_job(job, o, "evolutionary")});
  job.placement.strategy = placement::Strategy::Ordered;
  rows.push_back({"ordered", bench::run_job(job, o, "ordered")});
  job.placement.strategy = placement::Strategy::Random;
  job.placement.evaluations = 1;  // one random partition, not the best of many
  for (int seed = 1; seed <= setup.random; ++seed) {
    job.placement.seed = static_cast<uint64_t>(seed);
    const std::string name = "random seed " + std::to_string(seed);
    rows.push_back({name, bench::run_job(job, o, "random-" + std::to_string(seed))});
  }

  std::printf(
      "end_to_end_placement_bench: %s, bandwidth x %g, latency x %g; 4 stages x 2 replicas, 1f1b, "
      "8 layers, hidden 256, 2 micro-batches of 2 x 64 tokens per replica; %d steps "
      "(median after the first)\n\n",
      rows.front().result.plan.topology.name.c_str(), setup.bandwidth_scale, setup.latency_scale,
      o.steps);
  std::printf("%-15s %10s %10s %7s %9s  stage groups (replica 0 + replica 1)\n", "placement",
              "predicted", "measured", "error", "vs evol.");
  const double evolutionary = *rows.front().result.measured_iteration_s;
  bool predictions_ok = true, evolutionary_fastest = true;
  for (const Row& row : rows) {
    const double predicted = row.result.plan.simulation.iteration_s;
    const double measured = *row.result.measured_iteration_s;
    const double error = (predicted - measured) / measured;
    predictions_ok = predictions_ok && std::abs(error) <= 0.2;
    const bool same =
        &row != &rows.front() && stage_groups(row.result) == stage_groups(rows.front().result);
    if (&row != &rows.front() && !same && measured < evolutionary) evolutionary_fastest = false;
    std::printf("%-15s %8.3f s %8.3f s %+6.1f%% %8.2fx  %s%s\n", row.name.c_str(), predicted,
                measured, 100 * error, measured / evolutionary, stage_sites(row.result).c_str(),
                same ? "  (same)" : "");
  }
  std::printf("\nevolutionary placement fastest measured: %s\n",
              evolutionary_fastest ? "yes" : "NO");
  std::printf("every prediction within 20%% of the measurement: %s\n",
              predictions_ok ? "yes" : "NO");
  bench::finish_scratch(o);
  return predictions_ok && evolutionary_fastest ? 0 : 1;
}
