#include "placement/svg_text.h"

#include <algorithm>
#include <cmath>

namespace tessel::placement {

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double low, double high, int target) {
  if (!(high > low)) {
    const double pad = std::max(std::abs(low) * 0.1, 1.0);
    low -= pad;
    high += pad;
  }
  const double raw = (high - low) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::floor(low / step) * step; t <= high + step * 1e-9; t += step) {
    ticks.push_back(t);
  }
  if (ticks.back() < high - step * 1e-9) ticks.push_back(ticks.back() + step);
  return ticks;
}

}  // namespace tessel::placement
