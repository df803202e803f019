// The line chart's further curves (svg_chart.h ChartSeries): each drawn in a colour of its own
// inside the axes, the axes covering every curve, and a legend naming them; one curve alone has
// no legend.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "noderuntime/launcher/svg_chart.h"

namespace tessel::launcher {
namespace {

std::vector<std::string> polylines(const std::string& svg) {
  std::vector<std::string> colours;
  const std::regex line("<polyline fill=\"none\" stroke=\"(#[0-9a-f]{6})\" stroke-width");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line); it != std::sregex_iterator();
       ++it) {
    colours.push_back((*it)[1]);
  }
  return colours;
}

TEST(SvgChartSeries, EveryCurveHasItsColourAndALegendEntry) {
  LineChart chart;
  chart.title = "loss";
  chart.points_label = "synchronous";
  for (int i = 1; i <= 20; ++i) chart.points.emplace_back(i, 5.0 / i);
  chart.series.push_back({"H=10 8-bit", {}});
  chart.series.push_back({"H=50 <4-bit>", {}});
  for (int i = 1; i <= 20; ++i) chart.series[0].points.emplace_back(i, 6.0 / i);
  for (int i = 1; i <= 30; ++i) chart.series[1].points.emplace_back(i, 7.0 / i);
  const std::string svg = render_svg(chart);
  const std::vector<std::string> colours = polylines(svg);
  ASSERT_EQ(colours.size(), 3u);
  EXPECT_NE(colours[0], colours[1]);
  EXPECT_NE(colours[1], colours[2]);
  EXPECT_NE(svg.find(">synchronous</text>"), std::string::npos);
  EXPECT_NE(svg.find(">H=10 8-bit</text>"), std::string::npos);
  EXPECT_NE(svg.find(">H=50 &lt;4-bit&gt;</text>"), std::string::npos);
  // The x axis reaches the longest curve's 30: a tick labelled 30 is drawn.
  EXPECT_NE(svg.find(">30</text>"), std::string::npos);
}

TEST(SvgChartSeries, OneCurveHasNoLegendAndABadSeriesIsRefused) {
  LineChart chart;
  chart.points_label = "only";
  chart.points = {{1, 2}, {2, 1}};
  EXPECT_EQ(render_svg(chart).find(">only</text>"), std::string::npos);
  chart.series.push_back({"bad", {{1, std::nan("")}}});
  EXPECT_THROW(render_svg(chart), std::invalid_argument);
}

}  // namespace
}  // namespace tessel::launcher
