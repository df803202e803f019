// A small SVG line chart for the run report: axes with round-number ticks, a title, axis
// labels, one curve, and optional dashed horizontal reference lines with their labels. No
// scripts, no external fonts: it opens in any browser and renders on GitHub.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tessel::launcher {

struct ReferenceLine {
  double y = 0;
  std::string label;
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order
  std::vector<ReferenceLine> references;
  int width = 720;
  int height = 420;
};

// Throws std::invalid_argument when there are no points or a value is not finite.
std::string render_svg(const LineChart& chart);

}  // namespace tessel::launcher
