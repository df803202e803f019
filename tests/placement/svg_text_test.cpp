// What the SVG pictures share: escaped text and round ticks.
#include "placement/svg_text.h"

#include <gtest/gtest.h>

namespace tessel::placement {
namespace {

TEST(SvgText, EscapesWhatXmlReserves) {
  EXPECT_EQ(xml_escape("a < b && \"c\" > d"), "a &lt; b &amp;&amp; &quot;c&quot; &gt; d");
  EXPECT_EQ(xml_escape("plain"), "plain");
}

TEST(SvgText, TicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(nice_ticks(0, 300), (std::vector<double>{0, 50, 100, 150, 200, 250, 300}));
  EXPECT_EQ(nice_ticks(1.3, 5.6), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  const std::vector<double> one = nice_ticks(4, 4);  // a single value still gets an axis
  EXPECT_LT(one.front(), 4);
  EXPECT_GT(one.back(), 4);
}

}  // namespace
}  // namespace tessel::placement
