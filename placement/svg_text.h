// What the SVG pictures share (the timeline here, the report's loss curve in the launcher):
// text made safe for XML, and round-number axis ticks.
#pragma once

#include <string>
#include <vector>

namespace tessel::placement {

// &, <, > and " as entities.
std::string xml_escape(const std::string& text);

// Round tick values covering [low, high]: steps of 1, 2 or 5 x 10^k, about `target` of them.
// A single value (low == high) still gets an axis around it.
std::vector<double> nice_ticks(double low, double high, int target = 6);

}  // namespace tessel::placement
