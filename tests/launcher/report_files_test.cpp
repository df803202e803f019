// The report's own files: the SVG chart (the curve and reference line inside the axes) and the
// merged Chrome trace (every rank's events on one clock from zero); the status line's count of
// the steps a run did (a resumed run says the steps it ran and where it resumed).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "noderuntime/launcher/run_report.h"
#include "noderuntime/launcher/svg_chart.h"
#include "noderuntime/launcher/trace_merge.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

TEST(SvgChart, CurveAndReferenceLineAreDrawnInsideTheAxes) {
  LineChart chart;
  chart.title = "loss <fables>";
  chart.x_label = "step";
  chart.y_label = "loss";
  for (int i = 1; i <= 50; ++i) chart.points.emplace_back(i, 5.0 / i + 1.0);
  chart.references.push_back({3.1, "unigram entropy 3.100"});
  const std::string svg = render_svg(chart);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("loss &lt;fables&gt;"), std::string::npos);
  EXPECT_NE(svg.find("unigram entropy 3.100"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  const std::smatch curve = [&] {
    std::smatch m;
    std::regex_search(svg, m, std::regex("stroke=\"#1f77b4\"[^>]*points=\"([^\"]*)\""));
    return m;
  }();
  ASSERT_FALSE(curve.empty());
  const std::string points = curve[1];
  const std::regex pair("([0-9.]+),([0-9.]+)");
  int count = 0;
  for (auto it = std::sregex_iterator(points.begin(), points.end(), pair);
       it != std::sregex_iterator(); ++it, ++count) {
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    EXPECT_GE(x, 70);
    EXPECT_LE(x, chart.width - 20);
    EXPECT_GE(y, 40);
    EXPECT_LE(y, chart.height - 55);
  }
  EXPECT_EQ(count, 50);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(SvgChart, RefusesNothingToDraw) {
  EXPECT_THROW(render_svg(LineChart{}), std::invalid_argument);
  LineChart nan;
  nan.points = {{1, std::nan("")}};
  EXPECT_THROW(render_svg(nan), std::invalid_argument);
}

TEST(TraceMerge, RanksShareOneTimelineStartingAtZero) {
  const fs::path dir = fs::temp_directory_path() / ("tessel-trace-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto rank_trace = [&](int rank, double ts) {
    const nlohmann::json trace = {
        {"traceEvents",
         {{{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}},
          {{"name", "F mb0 c0"}, {"ph", "X"}, {"pid", rank}, {"tid", 2}, {"ts", ts}, {"dur", 5}}}}};
    const fs::path path = dir / ("trace-" + std::to_string(rank) + ".json");
    std::ofstream(path) << trace.dump();
    return path.string();
  };
  const std::vector<std::string> files = {rank_trace(0, 1000.0), rank_trace(1, 1250.0),
                                          (dir / "trace-2.json").string()};
  const TraceMergeResult result = merge_traces(files, (dir / "trace.json").string());
  EXPECT_EQ(result.merged, 2);
  EXPECT_EQ(result.missing, (std::vector<std::string>{files[2]}));
  const auto merged = nlohmann::json::parse(std::ifstream(dir / "trace.json"));
  std::vector<std::pair<int, double>> starts;
  for (const auto& e : merged.at("traceEvents")) {
    if (e.at("ph") == "X") starts.emplace_back(e.at("pid").get<int>(), e.at("ts").get<double>());
  }
  EXPECT_EQ(starts, (std::vector<std::pair<int, double>>{{0, 0.0}, {1, 250.0}}));

  std::ofstream(dir / "broken.json") << "{";
  EXPECT_THROW(merge_traces({(dir / "broken.json").string()}, (dir / "out.json").string()),
               std::runtime_error);
  fs::remove_all(dir);
}

LocalRunResult ran(std::optional<int64_t> resumed_from, std::vector<int64_t> steps) {
  LocalRunResult r;
  r.resumed_from = resumed_from;
  r.wall_s = 12.34;
  for (int64_t step : steps) r.steps.push_back(progress::StepMetrics{step});
  return r;
}

TEST(ReportSteps, AResumedRunSaysTheStepsItRanAndWhereItResumed) {
  LocalJob job;
  job.training.steps = 60;
  EXPECT_EQ(steps_done_text(job, ran(std::nullopt, {1, 2, 3})), "3 of 60 steps in 12.3 s");
  EXPECT_EQ(steps_done_text(job, ran(std::nullopt, {})), "0 of 60 steps in 12.3 s");
  std::vector<int64_t> later;
  for (int64_t step = 29; step <= 60; ++step) later.push_back(step);
  EXPECT_EQ(steps_done_text(job, ran(28, later)),
            "32 steps run (29 to 60 of 60), resumed from step 28, in 12.3 s");
  EXPECT_EQ(steps_done_text(job, ran(59, {60})),
            "1 step run (60 to 60 of 60), resumed from step 59, in 12.3 s");
  EXPECT_EQ(steps_done_text(job, ran(28, {})),
            "0 steps run (32 left of 60 after the checkpoint of step 28) in 12.3 s");
}

}  // namespace
}  // namespace tessel::launcher
