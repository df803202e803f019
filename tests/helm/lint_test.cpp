// `helm lint --strict` and `helm template` pass for both charts with their default values and
// with every example values file (helm/<chart>/examples/*.yaml).
#include <stdlib.h>

#include <chrono>
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

// helm/tessel/crds is a link to the repository's crds/: the packaged chart carries the files, and
// neither package carries its examples (.helmignore).
TEST(HelmCharts, PackagesCarryTheCrdsAndNotTheExamples) {
  TESSEL_SKIP_WITHOUT_HELM();
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "helm-package-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir_template.data()), nullptr);
  const std::filesystem::path dir = dir_template;
  for (const std::string chart : {"tessel", "tessel-member"}) {
    const auto packaged = package(chart, dir.string());
    ASSERT_EQ(packaged.exit_code, 0) << packaged.out << packaged.err;
    const auto listed = run_process({"tar", "tzf", (dir / (chart + "-0.1.0.tgz")).string()},
                                    std::chrono::seconds(60));
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    EXPECT_NE(listed.out.find(chart + "/values.schema.json"), std::string::npos) << listed.out;
    EXPECT_EQ(listed.out.find("/examples/"), std::string::npos) << listed.out;
    if (chart == "tessel") {
      EXPECT_NE(listed.out.find("tessel/crds/tessel.dev_trainingjobs.yaml"), std::string::npos)
          << listed.out;
      EXPECT_NE(listed.out.find("tessel/crds/tessel.dev_memberclusters.yaml"), std::string::npos)
          << listed.out;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(HelmCharts, EveryChartHasExamples) {
  EXPECT_GE(example_values("tessel").size(), 4u);
  EXPECT_GE(example_values("tessel-member").size(), 2u);
}

}  // namespace
}  // namespace tessel::testing::helm
