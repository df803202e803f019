#include "bench/kube/measurement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tessel::bench {

Measurement figure(std::string metric, double value, std::string unit) {
  return {std::move(metric), std::move(unit), {value}, false};
}

Measurement per_event(std::string metric, std::vector<double> values, std::string unit) {
  return {std::move(metric), std::move(unit), std::move(values), true};
}

void merge_run(std::vector<Measurement>& rows, const std::vector<Measurement>& run) {
  for (const Measurement& measured : run) {
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const Measurement& existing) {
      return existing.metric == measured.metric;
    });
    if (row == rows.end()) {
      rows.push_back(measured);
    } else {
      row->values.insert(row->values.end(), measured.values.begin(), measured.values.end());
    }
  }
}

void print_table(std::ostream& out, const std::string& title,
                 const std::vector<Measurement>& rows) {
  std::size_t width = std::string("metric").size();
  for (const Measurement& row : rows) width = std::max(width, row.metric.size());
  const int name_width = static_cast<int>(width);
  char line[512];
  out << "## " << title << "\n";
  std::snprintf(line, sizeof line, "%-*s %12s %10s  %s\n", name_width, "metric", "median", "p99",
                "unit");
  out << line;
  for (const Measurement& row : rows) {
    char p99[32] = "-";
    if (row.per_event) std::snprintf(p99, sizeof p99, "%.2f", quantile(row.values, 0.99));
    std::snprintf(line, sizeof line, "%-*s %12.2f %10s  %s\n", name_width, row.metric.c_str(),
                  quantile(row.values, 0.5), p99, row.unit.c_str());
    out << line;
  }
  out << std::flush;
}

double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) throw std::invalid_argument("quantile of no samples");
  std::sort(samples.begin(), samples.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size())));
  return samples[std::clamp<std::size_t>(rank, 1, samples.size()) - 1];
}

}  // namespace tessel::bench
