// The captured kube-apiserver 1.26 fixtures (tests/kube/fixtures/kube-1.26, see its README).
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tessel::kube::testing {

inline const std::filesystem::path kFixtures = TESSEL_FIXTURES_DIR;

// One fixture file (a path, or a name relative to the fixtures folder), parsed.
inline nlohmann::json fixture(const std::filesystem::path& file) {
  const std::filesystem::path path = file.is_absolute() ? file : kFixtures / file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open fixture " + path.string());
  return nlohmann::json::parse(in);
}

}  // namespace tessel::kube::testing
