// Every tests/helm/bad-values/*.yaml is refused by `helm template` (values.schema.json or the
// chart's own checks) with a message that names the value. Each file says which chart it is for
// and what the message must contain, in comments on its first lines:
//   # chart: tessel
//   # expect: replicaCount
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/helm/helm_fixture.h"

namespace tessel::testing::helm {
namespace {

const std::string kBadValues = std::string(TESSEL_SOURCE_DIR) + "/tests/helm/bad-values";

struct BadValues {
  std::string file;
  std::string chart;
  std::vector<std::string> expected;  // each must appear in helm's output
};

BadValues read_bad_values(const std::string& file) {
  BadValues bad{file, "", {}};
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line) && line.rfind("#", 0) == 0) {
    if (line.rfind("# chart: ", 0) == 0) bad.chart = line.substr(9);
    if (line.rfind("# expect: ", 0) == 0) bad.expected.push_back(line.substr(10));
  }
  return bad;
}

std::vector<std::string> bad_values_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kBadValues)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem().string();
  for (auto& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class BadValuesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BadValuesTest, IsRefusedNamingTheValue) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto bad = read_bad_values(GetParam());
  ASSERT_TRUE(bad.chart == "tessel" || bad.chart == "tessel-member")
      << bad.file << ": '# chart: tessel|tessel-member' on its first lines";
  ASSERT_FALSE(bad.expected.empty()) << bad.file << ": '# expect: ...' on its first lines";
  const auto result = render(bad.chart, bad.file);
  const std::string output = result.out + result.err;
  EXPECT_NE(result.exit_code, 0) << bad.file << " was accepted";
  for (const auto& expected : bad.expected) {
    EXPECT_NE(output.find(expected), std::string::npos)
        << bad.file << ": helm's message does not say '" << expected << "':\n"
        << result.err;
  }
  // helm lint reports it too: it fails on what the schema refuses, and logs the chart's own
  // cross-field checks (`fail` in a template) as "[INFO] Fail: ..." without failing (helm's
  // lint mode ignores `fail` by design), so the message is what is checked.
  const auto linted = lint(bad.chart, bad.file);
  for (const auto& expected : bad.expected) {
    EXPECT_NE((linted.out + linted.err).find(expected), std::string::npos)
        << bad.file << ": helm lint does not say '" << expected << "':\n"
        << linted.out << linted.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, BadValuesTest, ::testing::ValuesIn(bad_values_files()), case_name);

TEST(BadValues, AtLeastTenFiles) { EXPECT_GE(bad_values_files().size(), 10u); }

}  // namespace
}  // namespace tessel::testing::helm
