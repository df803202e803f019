#include "bench/kube/list_watch_bench.h"

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

namespace tessel::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::int64_t kPageSize = 500;
constexpr auto kWatchDeadline = std::chrono::minutes(1);

}  // namespace

std::vector<Measurement> measure_paginated_list(BenchCluster& cluster, int expected_objects) {
  // Page by page, as Client::list_all does, to time each page as well.
  kube::ListOptions options;
  options.limit = kPageSize;
  std::vector<double> page_ms;
  std::size_t listed = 0;
  const auto start = Clock::now();
  do {
    const auto sent = Clock::now();
    const nlohmann::json page =
        cluster.client().list(cluster.config_maps(), kBenchNamespace, options);
    page_ms.push_back(milliseconds_between(sent, Clock::now()));
    listed += page.at("items").size();
    options.continue_token = page["metadata"].value("continue", "");
  } while (!options.continue_token.empty());
  const double seconds = milliseconds_between(start, Clock::now()) / 1000;
  if (listed != static_cast<std::size_t>(expected_objects)) {
    throw std::runtime_error("the paginated list returned " + std::to_string(listed) +
                             " ConfigMaps, expected " + std::to_string(expected_objects));
  }
  const std::string what = "paginated list (" + std::to_string(expected_objects) + " objects, " +
                           std::to_string(kPageSize) + "/page)";
  return {figure(what, seconds * 1000, "ms"), figure(what, expected_objects / seconds, "objects/s"),
          per_event("one page of " + std::to_string(kPageSize) + ", round trip", page_ms, "ms")};
}

std::vector<Measurement> measure_watch_burst(BenchCluster& cluster, int objects, int updates,
                                             int writer_threads) {
  kube::ListOptions one;
  one.limit = 1;
  const std::string start_version = cluster.client().list(cluster.config_maps(), kBenchNamespace,
                                                          one)["metadata"]["resourceVersion"];

  // The watch starts from the version before the burst, so it sees every write however late
  // its connection is made.
  std::atomic<int> events{0};
  std::atomic<Clock::rep> last_event{0};
  // When the write of each update started, by its counter value; the watch thread reads them.
  std::vector<std::atomic<Clock::rep>> write_started(static_cast<std::size_t>(updates));
  std::vector<double> lags_ms;  // the watch thread's only, until it has ended
  std::stop_source stop_watch;
  auto watch_client = cluster.new_client();
  std::future<kube::WatchResult> watch = std::async(std::launch::async, [&] {
    kube::ListOptions options;
    options.resource_version = start_version;
    return watch_client->watch(
        cluster.config_maps(), kBenchNamespace, options,
        [&](const kube::WatchEvent& event) {
          if (event.type != kube::WatchEvent::Modified) return true;
          const Clock::time_point now = Clock::now();
          last_event = now.time_since_epoch().count();
          const auto counter = std::stoul(event.object["data"]["counter"].get<std::string>());
          const Clock::time_point started{Clock::duration{write_started.at(counter).load()}};
          lags_ms.push_back(milliseconds_between(started, now));
          return ++events < updates;
        },
        stop_watch.get_token());
  });

  const auto burst_start = Clock::now();
  std::vector<std::future<void>> writers;
  for (int t = 0; t < writer_threads; ++t) {
    writers.push_back(std::async(std::launch::async, [&, t] {
      for (int i = t; i < updates; i += writer_threads) {
        write_started[static_cast<std::size_t>(i)] = Clock::now().time_since_epoch().count();
        cluster.client().patch(cluster.config_maps(), kBenchNamespace, config_map_name(i % objects),
                               kube::PatchType::kMerge,
                               {{"data", {{"counter", std::to_string(i)}}}});
      }
    }));
  }
  try {
    for (auto& writer : writers) writer.get();
  } catch (...) {
    stop_watch.request_stop();
    throw;
  }
  const auto burst_end = Clock::now();

  if (watch.wait_for(kWatchDeadline) != std::future_status::ready) {
    stop_watch.request_stop();
    watch.wait();
    throw std::runtime_error("the watch delivered " + std::to_string(events.load()) + " of " +
                             std::to_string(updates) + " events within a minute");
  }
  const kube::WatchResult result = watch.get();
  if (events.load() != updates) {
    throw std::runtime_error("the watch ended (" + std::string(kube::to_string(result.end)) + " " +
                             result.detail + ") after " + std::to_string(events.load()) + " of " +
                             std::to_string(updates) + " events");
  }
  const Clock::time_point last{Clock::duration{last_event.load()}};
  const double burst_seconds = milliseconds_between(burst_start, burst_end) / 1000;
  const double delivery_seconds = milliseconds_between(burst_start, last) / 1000;
  const std::string what =
      std::to_string(updates) + " merge patches, " + std::to_string(writer_threads) + " writers";
  return {figure("burst of " + what, updates / burst_seconds, "writes/s"),
          figure("watch events during the burst", updates / delivery_seconds, "events/s"),
          per_event("write start -> its watch event", lags_ms, "ms")};
}

}  // namespace tessel::bench
