// A simulated iteration drawn as an SVG timeline: one row per rank with its forward and
// backward boxes (forwards in blues, backwards in oranges, a shade per model chunk, the
// micro-batch number inside), then the rank's all-reduce and optimizer step in a thin strip
// below. Idle time is the white between boxes: the pipeline bubble, to be seen at a glance.
#pragma once

#include <string>

#include "placement/simulator.h"

namespace tessel::placement {

struct TimelineSvgOptions {
  std::string title;   // drawn above the rows when not empty
  int width_px = 960;  // of the time axis
};

// Throws std::invalid_argument when the result has no events or a non-positive duration.
std::string timeline_svg(const SimulationResult& result, const TimelineSvgOptions& options = {});

}  // namespace tessel::placement
