// What a kube benchmark reports: one row per metric, merged over runs and printed as a small
// table, and the helpers that turn raw timings into rows.
#pragma once

#include <chrono>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace tessel::bench {

// A row holds either a figure measured once per run (a rate, a total time, memory per object)
// or the times of single events (a latency per request or per update). The table shows the
// median over the runs of a figure, and the median and 99th percentile over every event of
// every run of a latency.
struct Measurement {
  std::string metric;  // "paginated list (10000 objects, 500/page)"
  std::string unit;    // "ms", "objects/s", "bytes"
  std::vector<double> values;
  bool per_event = false;
};

Measurement figure(std::string metric, double value, std::string unit);
Measurement per_event(std::string metric, std::vector<double> values, std::string unit);

// Adds a run's rows to those of the runs before (rows match by metric; new ones go last).
void merge_run(std::vector<Measurement>& rows, const std::vector<Measurement>& run);

// "metric  median  p99  unit" rows under a header naming the run ("HTTPS, 3 runs"); a figure's
// p99 column is "-".
void print_table(std::ostream& out, const std::string& title, const std::vector<Measurement>& rows);

// The q-quantile (0 <= q <= 1) of `samples` by the nearest-rank method; throws
// std::invalid_argument for no samples.
double quantile(std::vector<double> samples, double q);

inline double milliseconds_between(std::chrono::steady_clock::time_point from,
                                   std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace tessel::bench
