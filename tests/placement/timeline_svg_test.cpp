// The simulated iteration drawn as SVG: one box per compute event where the simulator put it.
#include "placement/timeline_svg.h"

#include <gtest/gtest.h>

#include <regex>

#include "placement/schedule.h"

namespace tessel::placement {
namespace {

SimulationResult one_f_one_b(int p, int m) {
  const ScheduleSpec spec{ScheduleKind::OneFOneB, p, m, 1, 0};
  PipelineTiming timing;
  timing.stages.assign(p, StageTiming{0.010, 0.020, 0.005, 0});
  timing.hops.assign(p, HopTiming{});
  timing.optimizer_s = 0.002;
  return simulate_iteration(spec, timing);
}

int count(const std::string& text, const std::regex& pattern) {
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), pattern),
                                        std::sregex_iterator()));
}

TEST(TimelineSvg, OneBoxPerComputeEventOneStripPerCollectiveAndStep) {
  const SimulationResult sim = one_f_one_b(3, 4);
  const std::string svg = timeline_svg(sim, {"1F1B <p=3>", 600});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("1F1B &lt;p=3&gt;"), std::string::npos);  // escaped
  // 3 ranks x 4 micro-batches x (forward + backward).
  EXPECT_EQ(count(svg, std::regex("<title>[FB] mb\\d c0</title>")), 24);
  // Per rank: the all-reduce buckets and the optimizer step.
  int strips = 0;
  for (const TimedEvent& e : sim.events) {
    strips += e.stream == Stream::OptimizerComm || e.stream == Stream::OptimizerStep;
  }
  EXPECT_EQ(count(svg, std::regex("<title>(all-reduce|optimizer)")), strips);
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(svg.find(">rank " + std::to_string(r) + "<"), std::string::npos) << r;
  }
}

TEST(TimelineSvg, BoxesSitWhereTheSimulatorPutThem) {
  const SimulationResult sim = one_f_one_b(2, 2);
  const std::string svg = timeline_svg(sim, {"", 1000});
  double end_s = 0;
  for (const TimedEvent& e : sim.events) end_s = std::max(end_s, e.start_s + e.duration_s);
  // Rank 1's first backward, at its simulated start, scaled to the 1000 px axis after the
  // 70 px of labels.
  for (const TimedEvent& e : sim.events) {
    if (e.rank != 1 || e.name != "B mb0 c0") continue;
    const double x = 70 + e.start_s * 1000 / end_s;
    const std::regex box("<rect x=\"([0-9.e+-]+)\"[^>]*><title>B mb0 c0</title>");
    bool found = false;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), box); it != std::sregex_iterator();
         ++it) {
      found |= std::abs(std::stod((*it)[1]) - x) < 0.01;
    }
    EXPECT_TRUE(found) << "no box at x = " << x;
  }
}

TEST(TimelineSvg, RefusesAnEmptyIteration) {
  EXPECT_THROW(timeline_svg(SimulationResult{}), std::invalid_argument);
}

}  // namespace
}  // namespace tessel::placement
