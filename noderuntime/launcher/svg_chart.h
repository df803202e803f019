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

// A further curve, in a colour of its own, named in the legend.
struct ChartSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order
  std::vector<ReferenceLine> references;
  // With further curves, `points` is named points_label in the legend.
  std::string points_label;
  std::vector<ChartSeries> series;
  int width = 720;
  int height = 420;
};

// Throws std::invalid_argument when there are no points or a value is not finite.
std::string render_svg(const LineChart& chart);

}  // namespace tessel::launcher
