#include "noderuntime/launcher/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "placement/svg_text.h"

namespace tessel::launcher {
namespace {

// A tick label with no more digits than the tick step needs.
std::string tick_label(double value, double step) {
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, std::abs(value) < step * 1e-6 ? 0.0 : value);
  return text;
}

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", x);
  return text;
}

}  // namespace

std::string render_svg(const LineChart& chart) {
  if (chart.points.empty()) throw std::invalid_argument("line chart: no points to draw");
  double x_min = chart.points.front().first, x_max = x_min;
  double y_min = chart.points.front().second, y_max = y_min;
  auto include_y = [&](double y) {
    y_min = std::min(y_min, y);
    y_max = std::max(y_max, y);
  };
  std::vector<ChartSeries> curves = {{chart.points_label, chart.points}};
  curves.insert(curves.end(), chart.series.begin(), chart.series.end());
  for (const ChartSeries& curve : curves) {
    for (const auto& [x, y] : curve.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        throw std::invalid_argument("line chart: a point is not finite");
      }
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      include_y(y);
    }
  }
  for (const ReferenceLine& r : chart.references) include_y(r.y);
  if (y_min > 0 && y_min < 0.25 * y_max) y_min = 0;  // a falling curve reads best from zero
  const std::vector<double> xs = placement::nice_ticks(x_min, x_max);
  const std::vector<double> ys = placement::nice_ticks(y_min, y_max);
  const double x0 = xs.front(), x1 = xs.back(), y0 = ys.front(), y1 = ys.back();

  const double left = 70, right = chart.width - 20.0, top = 40, bottom = chart.height - 55.0;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (right - left); };
  auto py = [&](double y) { return bottom - (y - y0) / (y1 - y0) * (bottom - top); };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << chart.width << "\" height=\""
    << chart.height << "\" viewBox=\"0 0 " << chart.width << " " << chart.height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << chart.width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << placement::xml_escape(chart.title) << "</text>\n";
  // Grid and ticks.
  for (double t : xs) {
    o << "<line x1=\"" << number(px(t)) << "\" y1=\"" << number(top) << "\" x2=\"" << number(px(t))
      << "\" y2=\"" << number(bottom) << "\" stroke=\"#e4e4e4\"/>\n"
      << "<text x=\"" << number(px(t)) << "\" y=\"" << number(bottom + 18)
      << "\" text-anchor=\"middle\">" << tick_label(t, xs[1] - xs[0]) << "</text>\n";
  }
  for (double t : ys) {
    o << "<line x1=\"" << number(left) << "\" y1=\"" << number(py(t)) << "\" x2=\"" << number(right)
      << "\" y2=\"" << number(py(t)) << "\" stroke=\"#e4e4e4\"/>\n"
      << "<text x=\"" << number(left - 8) << "\" y=\"" << number(py(t) + 4)
      << "\" text-anchor=\"end\">" << tick_label(t, ys[1] - ys[0]) << "</text>\n";
  }
  // Axes and their labels.
  o << "<polyline points=\"" << number(left) << "," << number(top) << " " << number(left) << ","
    << number(bottom) << " " << number(right) << "," << number(bottom)
    << "\" fill=\"none\" stroke=\"black\"/>\n"
    << "<text x=\"" << number((left + right) / 2) << "\" y=\"" << chart.height - 12
    << "\" text-anchor=\"middle\">" << placement::xml_escape(chart.x_label) << "</text>\n"
    << "<text transform=\"translate(18," << number((top + bottom) / 2)
    << ") rotate(-90)\" text-anchor=\"middle\">" << placement::xml_escape(chart.y_label)
    << "</text>\n";
  for (const ReferenceLine& r : chart.references) {
    o << "<line x1=\"" << number(left) << "\" y1=\"" << number(py(r.y)) << "\" x2=\""
      << number(right) << "\" y2=\"" << number(py(r.y))
      << "\" stroke=\"#c0392b\" stroke-dasharray=\"6,4\"/>\n"
      << "<text x=\"" << number(right - 4) << "\" y=\"" << number(py(r.y) - 5)
      << "\" text-anchor=\"end\" fill=\"#c0392b\">" << placement::xml_escape(r.label)
      << "</text>\n";
  }
  static const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  for (size_t c = 0; c < curves.size(); ++c) {
    const char* colour = kColours[c % std::size(kColours)];
    o << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.8\" points=\"";
    for (size_t i = 0; i < curves[c].points.size(); ++i) {
      o << (i ? " " : "") << number(px(curves[c].points[i].first)) << ","
        << number(py(curves[c].points[i].second));
    }
    o << "\"/>\n";
    if (curves.size() > 1) {  // the legend, top right
      const double y = top + 14 + 16.0 * static_cast<double>(c);
      o << "<line x1=\"" << number(right - 150) << "\" y1=\"" << number(y - 4) << "\" x2=\""
        << number(right - 130) << "\" y2=\"" << number(y - 4) << "\" stroke=\"" << colour
        << "\" stroke-width=\"2\"/>\n"
        << "<text x=\"" << number(right - 125) << "\" y=\"" << number(y) << "\">"
        << placement::xml_escape(curves[c].label) << "</text>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace tessel::launcher
