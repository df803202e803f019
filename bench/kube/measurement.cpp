#include "bench/kube/measurement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tessel::bench {

void print_table(std::ostream& out, const std::string& title,
                 const std::vector<Measurement>& rows) {
  std::size_t width = std::string("metric").size();
  for (const Measurement& row : rows) width = std::max(width, row.metric.size());
  char line[512];
  out << "## " << title << "\n";
  std::snprintf(line, sizeof line, "%-*s %14s  %s\n", static_cast<int>(width), "metric", "value",
                "unit");
  out << line;
  for (const Measurement& row : rows) {
    std::snprintf(line, sizeof line, "%-*s %14.2f  %s\n", static_cast<int>(width),
                  row.metric.c_str(), row.value, row.unit.c_str());
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
