// What a kube benchmark reports: one row per metric, printed as a small table, and the
// helpers that turn raw timings into rows.
#pragma once

#include <chrono>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace tessel::bench {

struct Measurement {
  std::string metric;  // "paginated list_all (10000 objects, 500/page)"
  double value = 0;
  std::string unit;  // "ms", "objects/s", "bytes/object"
};

// "metric  value  unit" rows under a header naming the run ("HTTPS", "HTTP").
void print_table(std::ostream& out, const std::string& title, const std::vector<Measurement>& rows);

// The q-quantile (0 <= q <= 1) of `samples` by the nearest-rank method; throws
// std::invalid_argument for no samples.
double quantile(std::vector<double> samples, double q);

inline double milliseconds_between(std::chrono::steady_clock::time_point from,
                                   std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace tessel::bench
