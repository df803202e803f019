// kube_bench: the Kubernetes client library against an in-process API test server, over HTTP
// and over HTTPS. For each: create N ConfigMaps, time a paginated list of them, the watch
// events of a burst of writes, an informer's initial sync and the memory its cache holds per
// object, and the latency from a write to the reconcile of its key through informer and
// controller. Prints one table per transport; results.md records a run.
//
//   kube_bench [--objects 10000] [--updates 2000] [--transport both|http|https]
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "bench/kube/bench_cluster.h"
#include "bench/kube/list_watch_bench.h"
#include "bench/kube/measurement.h"
#include "bench/kube/reconcile_latency_bench.h"

namespace {

using tessel::bench::Measurement;

constexpr int kWriterThreads = 2;

std::vector<Measurement> run_all(bool tls, int objects, int updates) {
  const std::string transport = tls ? "HTTPS" : "HTTP";
  std::cerr << "kube_bench: " << transport << ": creating " << objects << " ConfigMaps"
            << std::endl;
  tessel::bench::BenchCluster cluster(tls);
  const double create_seconds = cluster.create_config_maps(objects, kWriterThreads);
  std::vector<Measurement> rows = {{"create (" + std::to_string(kWriterThreads) + " writers)",
                                    objects / create_seconds, "objects/s"}};
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
  int updates = 2000;
  std::string transport = "both";
  app.add_option("--objects", objects, "ConfigMaps to create, list, watch and cache")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--updates", updates, "writes in the watch burst and the latency run")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--transport", transport, "which servers to run against")
      ->check(CLI::IsMember({"both", "http", "https"}));
  CLI11_PARSE(app, argc, argv);

  try {
    for (const bool tls : {false, true}) {
      if (transport == (tls ? "http" : "https")) continue;
      const std::vector<Measurement> rows = run_all(tls, objects, updates);
      tessel::bench::print_table(std::cout, tls ? "HTTPS" : "HTTP", rows);
      std::cout << "\n";
    }
  } catch (const std::exception& error) {
    std::cerr << "kube_bench: " << error.what() << std::endl;
    return 1;
  }
  return 0;
}
