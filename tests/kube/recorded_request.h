// Compares a request the client built with the one a fixture recorded: method, path, query
// parameters (percent-decoded, so that kubectl's and tessel's equivalent encodings compare
// equal), Content-Type and JSON body.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kube/http_transport.h"
#include "tests/kube/fake_transport.h"
#include "tests/kube/fixtures.h"

namespace tessel::kube::testing {

inline std::string percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

inline std::string target_path(std::string_view target) {
  return std::string(target.substr(0, target.find('?')));
}

// The query parameters in order, decoded.
inline std::vector<std::pair<std::string, std::string>> target_query(std::string_view target) {
  std::vector<std::pair<std::string, std::string>> parameters;
  const auto question = target.find('?');
  if (question == std::string_view::npos) return parameters;
  std::string_view rest = target.substr(question + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const auto eq = pair.find('=');
    parameters.emplace_back(
        percent_decode(pair.substr(0, eq)),
        eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1)));
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return parameters;
}

// Expects `actual` to be the request of fixture `name`. DeleteOptions' apiVersion and kind
// (which kubectl sends and tessel leaves out) are not compared.
inline void expect_fixture_request(const HttpRequest& actual, const std::string& name) {
  SCOPED_TRACE("fixture " + name);
  const nlohmann::json recorded = fixture(name).at("request");
  const std::string recorded_target = recorded.at("path").get<std::string>();
  EXPECT_EQ(actual.method, recorded.at("method").get<std::string>());
  EXPECT_EQ(target_path(actual.target), target_path(recorded_target));
  EXPECT_EQ(target_query(actual.target), target_query(recorded_target));
  EXPECT_EQ(header_of(actual, "Accept"), "application/json");
  const nlohmann::json headers = recorded.at("headers");
  EXPECT_EQ(header_of(actual, "Content-Type"), headers.value("Content-Type", ""));
  if (!recorded.contains("body")) {
    EXPECT_EQ(actual.body, "");
    return;
  }
  nlohmann::json expected = recorded.at("body");
  nlohmann::json body = nlohmann::json::parse(actual.body);
  if (expected.is_object() && expected.value("kind", "") == "DeleteOptions") {
    expected.erase("kind");
    expected.erase("apiVersion");
  }
  EXPECT_EQ(body, expected);
}

// The response body a fixture recorded.
inline nlohmann::json fixture_body(const std::string& name) {
  return fixture(name).at("response").at("body");
}

}  // namespace tessel::kube::testing
