// What several of the API test server's own tests start from: a server over plain HTTP, and a
// small ConfigMap to write to it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/api_test_server.h"

namespace tessel::testing {

inline ApiTestServerOptions plain_options() {
  ApiTestServerOptions options;
  options.tls = false;
  return options;
}

inline nlohmann::json config_map(const std::string& name,
                                 nlohmann::json labels = nlohmann::json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
          {"data", {{"k", "v"}}}};
}

}  // namespace tessel::testing
