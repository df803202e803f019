// Replays the captured kube-apiserver fixtures (tests/kube/fixtures/kube-1.26) against the API
// test server: sends a fixture's request, with the resourceVersions and uids of the capture
// translated to this server's, and compares the response's status, Content-Type, Warning
// headers and body with the captured one, ignoring what differs on every run (uids,
// timestamps, resourceVersions, Table ages).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "kube/base64.h"
#include "tests/apiserver/api_test_client.h"
#include "tests/kube/fixtures.h"

namespace tessel::testing {

// The fields whose values differ on every run.
inline bool is_run_specific(const std::string& key) {
  return key == "uid" || key == "resourceVersion" || key == "creationTimestamp" ||
         key == "deletionTimestamp" || key == "time" || key == "lastTransitionTime";
}

inline std::string decode_base64url(std::string text) {
  std::replace(text.begin(), text.end(), '-', '+');
  std::replace(text.begin(), text.end(), '_', '/');
  while (text.size() % 4) text += '=';
  return kube::base64_decode(text).value_or("");
}

inline std::string encode_base64url(const std::string& bytes) {
  std::string text = kube::base64_encode(bytes);
  while (!text.empty() && text.back() == '=') text.pop_back();
  std::replace(text.begin(), text.end(), '+', '-');
  std::replace(text.begin(), text.end(), '/', '_');
  return text;
}

// A continue token with its resourceVersion blanked (or kept when it is -1: "inconsistent").
inline nlohmann::json normalized_continue(const std::string& token) {
  if (token.empty()) return token;
  nlohmann::json decoded = nlohmann::json::parse(decode_base64url(token), nullptr, false);
  if (decoded.is_object() && decoded.value("rv", 0) != -1) decoded["rv"] = "<rv>";
  return decoded;
}

inline nlohmann::json normalized(const nlohmann::json& value, const std::string& key = "") {
  static const std::regex kAge("^[0-9]+[smhdy]([0-9]+[smhd])?$");
  if (value.is_object()) {
    nlohmann::json result = nlohmann::json::object();
    for (const auto& [child_key, child] : value.items()) {
      if (child_key.rfind("k:{\"uid\":", 0) == 0) {
        result["k:{\"uid\":\"<uid>\"}"] = normalized(child, child_key);  // an ownerReference's
      } else if (is_run_specific(child_key) && child.is_string()) {
        result[child_key] = "<" + child_key + ">";
      } else if (child_key == "continue" && child.is_string()) {
        result[child_key] = normalized_continue(child.get<std::string>());
      } else {
        result[child_key] = normalized(child, child_key);
      }
    }
    return result;
  }
  if (value.is_array()) {
    nlohmann::json result = nlohmann::json::array();
    for (const nlohmann::json& element : value) {
      if (key == "cells" && element.is_string() &&
          std::regex_match(element.get<std::string>(), kAge)) {
        result.push_back("<age>");
      } else {
        result.push_back(normalized(element, key));
      }
    }
    return result;
  }
  return value;
}

// kube-apiserver orders managedFields by operation, then time in whole seconds, then manager
// and subresource: a replay whose expected order rests on writes of one second starts at the
// beginning of a second.
inline void wait_for_the_next_second() {
  const auto now = std::chrono::system_clock::now();
  const auto next = std::chrono::ceil<std::chrono::seconds>(now);
  std::this_thread::sleep_until(next + std::chrono::milliseconds(5));
}

class FixtureReplay {
 public:
  explicit FixtureReplay(const TestClient& client) : client_(client) {}

  // Sends the fixture's request as captured (translated) and returns the response, checking
  // status, Content-Type and Warning headers, and (compare_body) the normalized body.
  ClientResponse replay(const std::string& name, bool compare_body = true) {
    SCOPED_TRACE(name);
    const nlohmann::json fixture = kube::testing::fixture(name);
    const nlohmann::json& request = fixture["request"];
    const nlohmann::json& expected = fixture["response"];
    const nlohmann::json headers = request.value("headers", nlohmann::json::object());
    follow_the_captured_clock(expected["headers"].value("Date", ""));
    std::string body;
    if (request.contains("body")) {
      const nlohmann::json translated = translate(request["body"], "");
      body = translated.is_string() ? translated.get<std::string>() : translated.dump();
    }
    const ClientResponse response =
        client_.request(request["method"], translate_target(request["path"]), body,
                        headers.value("Content-Type", "application/json"),
                        headers.value("Accept", "application/json"));
    EXPECT_EQ(response.status, expected["status"].get<int>()) << response.body;
    const nlohmann::json& expected_headers = expected["headers"];
    const std::string content_type = expected_headers.value("Content-Type", "");
    const std::vector<std::string> types = response.header_values("Content-Type");
    EXPECT_EQ(types.empty() ? "" : types.front(), content_type);
    std::vector<std::string> warnings;
    if (expected_headers.contains("Warning")) {
      const nlohmann::json& warning = expected_headers["Warning"];
      if (warning.is_array()) {
        for (const auto& value : warning) warnings.push_back(value);
      } else {
        warnings.push_back(warning);
      }
    }
    EXPECT_EQ(response.header_values("Warning"), warnings);
    if (expected["body"].is_string()) {
      EXPECT_EQ(response.body, expected["body"].get<std::string>());
      return response;
    }
    const nlohmann::json actual = nlohmann::json::parse(response.body, nullptr, false);
    if (actual.is_discarded()) {
      ADD_FAILURE() << "not JSON: " << response.body;
      return response;
    }
    learn(expected["body"], actual);
    if (compare_body) {
      EXPECT_EQ(normalized(actual).dump(2), normalized(expected["body"]).dump(2));
    }
    return response;
  }

  // What a fixture's resourceVersion or uid is called on this server.
  std::string version(const std::string& captured) const { return lookup(versions_, captured); }
  std::string uid(const std::string& captured) const { return lookup(uids_, captured); }
  // Records that the capture's resourceVersions and uids in `captured` are `actual`'s.
  void learn(const nlohmann::json& captured, const nlohmann::json& actual) {
    if (captured.is_object() && actual.is_object()) {
      for (const auto& [key, value] : captured.items()) {
        if (!actual.contains(key)) continue;
        if (value.is_string() && actual[key].is_string()) {
          if (key == "resourceVersion") versions_[value] = actual[key];
          if (key == "uid") uids_[value] = actual[key];
          if (key == "time") times_[value] = actual[key];
        } else {
          learn(value, actual[key]);
        }
      }
    } else if (captured.is_array() && actual.is_array() && captured.size() == actual.size()) {
      for (std::size_t i = 0; i < captured.size(); ++i) learn(captured[i], actual[i]);
    }
  }

 private:
  // Where the capture's Date moved on to a new second, the replay waits for one too: the
  // server orders managedFields by their time in whole seconds.
  void follow_the_captured_clock(const std::string& date) {
    std::tm parts{};
    if (date.empty() || !strptime(date.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &parts)) return;
    const std::time_t captured = timegm(&parts);
    if (last_captured_ != 0 && captured > last_captured_) wait_for_the_next_second();
    last_captured_ = captured;
  }

  static std::string lookup(const std::map<std::string, std::string>& map,
                            const std::string& captured) {
    const auto found = map.find(captured);
    return found == map.end() ? captured : found->second;
  }

  nlohmann::json translate(const nlohmann::json& value, const std::string& key) const {
    if (value.is_object()) {
      nlohmann::json result = nlohmann::json::object();
      const bool version_test = value.value("path", "").ends_with("/resourceVersion");
      for (const auto& [child_key, child] : value.items()) {
        if (child.is_string() &&
            (child_key == "resourceVersion" || (version_test && child_key == "value"))) {
          result[child_key] = version(child);
        } else if (child.is_string() && child_key == "uid") {
          result[child_key] = uid(child);
        } else if (child.is_string() && child_key == "time") {
          // A managedFields entry sent back as read: its time as this server wrote it.
          result[child_key] = lookup(times_, child);
        } else {
          result[child_key] = translate(child, child_key);
        }
      }
      return result;
    }
    if (value.is_array()) {
      nlohmann::json result = nlohmann::json::array();
      for (const auto& element : value) result.push_back(translate(element, key));
      return result;
    }
    return value;
  }

  // Continue tokens carry a resourceVersion of the capture.
  std::string translate_target(const std::string& target) const {
    static const std::regex kContinue("continue=([A-Za-z0-9_-]+)");
    std::smatch match;
    if (!std::regex_search(target, match, kContinue)) return target;
    nlohmann::ordered_json token =
        nlohmann::ordered_json::parse(decode_base64url(match[1].str()), nullptr, false);
    if (token.is_discarded() || !token.contains("rv")) return target;
    const std::string captured = std::to_string(token["rv"].get<std::int64_t>());
    const std::string translated = version(captured);
    token["rv"] = translated == captured ? 1 : std::stoll(translated);
    return match.prefix().str() + "continue=" + encode_base64url(token.dump()) +
           match.suffix().str();
  }

  const TestClient& client_;
  std::map<std::string, std::string> versions_;
  std::map<std::string, std::string> uids_;
  std::map<std::string, std::string> times_;
  std::time_t last_captured_ = 0;
};

}  // namespace tessel::testing
