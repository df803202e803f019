#include "placement/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "placement/svg_text.h"

namespace tessel::placement {
namespace {

constexpr int kLeftPx = 70;  // rank labels
constexpr int kRowPx = 34;   // compute boxes
constexpr int kStripPx = 8;  // all-reduce and optimizer strip under each row
constexpr int kRowGapPx = 10;
constexpr int kTitlePx = 28;
constexpr int kAxisPx = 30;

// Blues for forwards, oranges for backwards; darker for later chunks.
const char* const kForward[] = {"#9ecae1", "#6baed6", "#4292c6", "#2171b5"};
const char* const kBackward[] = {"#fdae6b", "#fd8d3c", "#f16913", "#d94801"};

// "F mb3 c1" -> micro-batch 3, chunk 1; false for names of another shape.
bool parse_compute(const std::string& name, int& micro_batch, int& chunk) {
  return std::sscanf(name.c_str(), "%*c mb%d c%d", &micro_batch, &chunk) == 2;
}

std::string format_seconds(double s, double step) {
  char text[32];
  if (step >= 1) {
    std::snprintf(text, sizeof text, "%g s", s);
  } else {
    std::snprintf(text, sizeof text, "%g ms", std::round(s * 1e6) / 1e3);
  }
  return text;
}

}  // namespace

std::string timeline_svg(const SimulationResult& result, const TimelineSvgOptions& options) {
  if (result.events.empty()) throw std::invalid_argument("timeline: no events to draw");
  double end_s = 0;
  int ranks = 0;
  for (const TimedEvent& e : result.events) {
    end_s = std::max(end_s, e.start_s + e.duration_s);
    ranks = std::max(ranks, e.rank + 1);
  }
  if (!(end_s > 0)) throw std::invalid_argument("timeline: the iteration takes no time");
  const double px_per_s = options.width_px / end_s;
  const int top = options.title.empty() ? 8 : kTitlePx;
  const int row_pitch = kRowPx + kStripPx + kRowGapPx;
  const int height = top + ranks * row_pitch + kAxisPx;
  const int width = kLeftPx + options.width_px + 20;

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!options.title.empty()) {
    svg << "<text x=\"" << kLeftPx << "\" y=\"18\" font-size=\"14\">" << xml_escape(options.title)
        << "</text>\n";
  }
  for (int r = 0; r < ranks; ++r) {
    const int y = top + r * row_pitch;
    svg << "<text x=\"4\" y=\"" << y + kRowPx / 2 + 4 << "\">rank " << r << "</text>\n";
    svg << "<line x1=\"" << kLeftPx << "\" x2=\"" << kLeftPx + options.width_px << "\" y1=\""
        << y + kRowPx << "\" y2=\"" << y + kRowPx << "\" stroke=\"#ddd\"/>\n";
  }
  for (const TimedEvent& e : result.events) {
    const bool forward = e.stream == Stream::ForwardCompute;
    const bool backward = e.stream == Stream::BackwardCompute;
    const bool strip = e.stream == Stream::OptimizerComm || e.stream == Stream::OptimizerStep;
    if (!(forward || backward || strip) || e.duration_s <= 0) continue;
    const double x = kLeftPx + e.start_s * px_per_s;
    const double scaled_w = e.duration_s * px_per_s;
    const double w = scaled_w < 0.5 ? 0.5 : scaled_w;  // a hairline at least
    const int y = top + e.rank * row_pitch;
    if (strip) {
      const char* fill = e.stream == Stream::OptimizerComm ? "#74c476" : "#969696";
      svg << "<rect x=\"" << x << "\" y=\"" << y + kRowPx + 1 << "\" width=\"" << w
          << "\" height=\"" << kStripPx - 2 << "\" fill=\"" << fill << "\"><title>"
          << xml_escape(e.name) << "</title></rect>\n";
      continue;
    }
    int micro_batch = 0, chunk = 0;
    parse_compute(e.name, micro_batch, chunk);
    const int shade = chunk < 0 ? 0 : (chunk > 3 ? 3 : chunk);
    const char* fill = (forward ? kForward : kBackward)[shade];
    svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << kRowPx
        << "\" fill=\"" << fill << "\" stroke=\"white\" stroke-width=\"1\"><title>"
        << xml_escape(e.name) << "</title></rect>\n";
    if (w >= 14) {
      svg << "<text x=\"" << x + w / 2 << "\" y=\"" << y + kRowPx / 2 + 4
          << "\" text-anchor=\"middle\">" << micro_batch << "</text>\n";
    }
  }
  const std::vector<double> ticks = nice_ticks(0, end_s, 10);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : end_s;
  const int axis_y = top + ranks * row_pitch;
  for (double t : ticks) {
    if (t > end_s * (1 + 1e-9)) break;
    const double x = kLeftPx + t * px_per_s;
    svg << "<line x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << axis_y - 4 << "\" y2=\"" << axis_y
        << "\" stroke=\"#333\"/>\n";
    svg << "<text x=\"" << x << "\" y=\"" << axis_y + 14 << "\" text-anchor=\"middle\">"
        << format_seconds(t, step) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace tessel::placement
