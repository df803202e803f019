// examples/trainingjobs/fables.yaml as JSON: the job the operator's tests start from.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "api/yaml_json.h"

namespace tessel::server {

inline nlohmann::json example_job() {
  const std::string path = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return api::yaml_to_json(text.str(), path);
}

}  // namespace tessel::server
