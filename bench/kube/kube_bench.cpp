// kube_bench: the Kubernetes client library against an in-process API test server, over HTTP
// and over HTTPS. For each, `runs` times on a fresh server: create N ConfigMaps, list them page
// by page, the watch events of a burst of writes, an informer's initial sync and the memory its
// cache holds per object, a controller's first pass over every cached key, and the latency from
// a write to the reconcile of its key. Prints one table per transport (medians over the runs;
// per-event times as median and 99th percentile); results.md and docs/benchmarks.md record runs.
//
//   kube_bench [--objects 10000] [--updates 10000] [--runs 3] [--transport both|http|https]
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "bench/kube/bench_cluster.h"
#include "bench/kube/list_watch_bench.h"
#include "bench/kube/machine.h"
#include "bench/kube/measurement.h"
#include "bench/kube/reconcile_latency_bench.h"

namespace {

using tessel::bench::Measurement;

constexpr int kWriterThreads = 2;

std::vector<Measurement> run_once(bool tls, int objects, int updates) {
  const std::string transport = tls ? "HTTPS" : "HTTP";
  std::cerr << "kube_bench: " << transport << ": creating " << objects << " ConfigMaps"
            << std::endl;
  tessel::bench::BenchCluster cluster(tls);
  const auto creation = cluster.create_config_maps(objects, kWriterThreads);
  std::vector<Measurement> rows = {
      tessel::bench::figure("create (" + std::to_string(kWriterThreads) + " writers)",
                            objects / creation.seconds, "objects/s"),
      tessel::bench::per_event("one create, round trip", creation.round_trip_ms, "ms")};
  const auto add = [&rows](std::vector<Measurement> more) {
    rows.insert(rows.end(), more.begin(), more.end());
  };
  std::cerr << "kube_bench: " << transport << ": list, watch burst" << std::endl;
  add(tessel::bench::measure_paginated_list(cluster, objects));
  add(tessel::bench::measure_watch_burst(cluster, objects, updates, kWriterThreads));
  std::cerr << "kube_bench: " << transport << ": informer, controller" << std::endl;
  add(tessel::bench::measure_informer_and_reconcile(cluster, objects, updates));
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Benchmarks tessel's Kubernetes client against the API test server", "kube_bench"};
  int objects = 10000;
  int updates = 10000;
  int runs = 3;
  std::string transport = "both";
  app.add_option("--objects", objects, "ConfigMaps to create, list, watch and cache")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--updates", updates,
                 "writes in the watch burst and in the latency run (objects round robin)")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--runs", runs, "runs per transport, each on a fresh server")
      ->check(CLI::Range(1, 100));
  app.add_option("--transport", transport, "which servers to run against")
      ->check(CLI::IsMember({"both", "http", "https"}));
  CLI11_PARSE(app, argc, argv);

  try {
    for (const bool tls : {false, true}) {
      if (transport == (tls ? "http" : "https")) continue;
      const std::string load_before = tessel::bench::load_average();
      std::vector<Measurement> rows;
      for (int run = 0; run < runs; ++run) {
        tessel::bench::merge_run(rows, run_once(tls, objects, updates));
      }
      std::cout << "# " << tessel::bench::cpu_summary() << "; load average " << load_before
                << " at the start, " << tessel::bench::load_average() << " at the end\n";
      tessel::bench::print_table(std::cout,
                                 std::string(tls ? "HTTPS" : "HTTP") + ": " +
                                     std::to_string(objects) + " objects, " +
                                     std::to_string(updates) + " updates, " + std::to_string(runs) +
                                     (runs == 1 ? " run" : " runs"),
                                 rows);
      std::cout << "\n";
    }
  } catch (const std::exception& error) {
    std::cerr << "kube_bench: " << error.what() << std::endl;
    return 1;
  }
  return 0;
}
