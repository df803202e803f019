// `helm lint --strict` and `helm template` pass for both charts with their default values and
// with every example values file (helm/<chart>/examples/*.yaml).
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/helm/helm_fixture.h"

namespace tessel::testing::helm {
namespace {

// (chart, values file or "" for the defaults)
using ChartValues = std::pair<std::string, std::string>;

std::vector<ChartValues> every_chart_and_values() {
  std::vector<ChartValues> cases;
  for (const std::string chart : {"tessel", "tessel-member"}) {
    cases.emplace_back(chart, "");
    for (const auto& file : example_values(chart)) cases.emplace_back(chart, file);
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<ChartValues>& info) {
  std::string name =
      info.param.first + "_" +
      (info.param.second.empty() ? std::string("defaults")
                                 : std::filesystem::path(info.param.second).stem().string());
  for (auto& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class ChartValuesTest : public ::testing::TestWithParam<ChartValues> {};

TEST_P(ChartValuesTest, LintsStrictly) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto& [chart, values] = GetParam();
  const auto result = lint(chart, values);
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("0 chart(s) failed"), std::string::npos) << result.out;
}

TEST_P(ChartValuesTest, RendersObjectsWithNamesAndLabels) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto& [chart, values] = GetParam();
  const auto objects = render_objects(chart, values);
  ASSERT_GE(objects.size(), 5u);
  for (const auto& o : objects) {
    const std::string what = o["kind"].as<std::string>() + " " + YAML::Dump(o["metadata"]["name"]);
    EXPECT_TRUE(o["apiVersion"].IsScalar()) << what;
    EXPECT_FALSE(o["metadata"]["name"].as<std::string>().empty()) << what;
    EXPECT_EQ(o["metadata"]["labels"]["app.kubernetes.io/part-of"].as<std::string>(""), "tessel")
        << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Charts, ChartValuesTest, ::testing::ValuesIn(every_chart_and_values()),
                         case_name);

TEST(HelmCharts, EveryChartHasExamples) {
  EXPECT_GE(example_values("tessel").size(), 4u);
  EXPECT_GE(example_values("tessel-member").size(), 2u);
}

}  // namespace
}  // namespace tessel::testing::helm
