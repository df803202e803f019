#include "noderuntime/launcher/yaml_fields.h"

#include <cmath>

#include "placement/limits.h"

namespace tessel::launcher {
namespace {

// The value as the user wrote it, for error messages.
std::string shown(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

}  // namespace

YamlFields::YamlFields(YAML::Node node, std::string path, std::string source)
    : node_(std::move(node)), path_(std::move(path)), source_(std::move(source)) {
  if (!node_.IsMap()) fail(path_.empty() ? "(document)" : path_, "expected a mapping");
}

void YamlFields::fail(const std::string& field, const std::string& why) const {
  throw LocalJobError(source_ + ": " + field + ": " + why);
}

std::string YamlFields::field(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void YamlFields::allow(const std::set<std::string>& keys) const {
  for (const auto& entry : node_) {
    const std::string key = entry.first.Scalar();
    if (!keys.count(key)) {
      std::string known;
      for (const std::string& k : keys) known += (known.empty() ? "" : ", ") + k;
      fail(field(key), "unknown field (known: " + known + ")");
    }
  }
}

bool YamlFields::has(const std::string& key) const {
  const YAML::Node& self = node_;
  return static_cast<bool>(self[key]);
}

YamlFields YamlFields::section(const std::string& key) const {
  if (!has(key)) fail(field(key), "missing");
  const YAML::Node& self = node_;
  return YamlFields(self[key], field(key), source_);
}

int64_t YamlFields::integer(const std::string& key, int64_t fallback, int64_t min,
                            int64_t max) const {
  return has(key) ? required_integer(key, min, max) : fallback;
}

int64_t YamlFields::required_integer(const std::string& key, int64_t min, int64_t max) const {
  if (!has(key)) fail(field(key), "missing");
  const YAML::Node value = node(key);
  int64_t x = 0;
  try {
    x = value.as<int64_t>();
  } catch (const YAML::Exception&) {
    fail(field(key), "expected an integer, got " + shown(value));
  }
  if (x < min || x > max) {
    fail(field(key), "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                         std::to_string(x));
  }
  return x;
}

uint64_t YamlFields::unsigned_integer(const std::string& key, uint64_t fallback) const {
  if (!has(key)) return fallback;
  const YAML::Node value = node(key);
  try {
    if (!value.Scalar().empty() && value.Scalar()[0] != '-') return value.as<uint64_t>();
  } catch (const YAML::Exception&) {
  }
  fail(field(key), "expected a non-negative integer, got " + shown(value));
}

double YamlFields::number(const std::string& key, double fallback, double min, double max,
                          bool exclusive_min) const {
  if (!has(key)) return fallback;
  const YAML::Node value = node(key);
  double x = 0;
  try {
    x = value.as<double>();
  } catch (const YAML::Exception&) {
    fail(field(key), "expected a number, got " + shown(value));
  }
  const bool below = exclusive_min ? !(x > min) : !(x >= min);
  if (!std::isfinite(x) || below || x > max) {
    std::string range = (exclusive_min ? "(" : "[") + placement::number_text(min) + ", " +
                        (std::isinf(max) ? "inf)" : placement::number_text(max) + "]");
    fail(field(key), "must be in " + range + ", got " + shown(value));
  }
  return x;
}

bool YamlFields::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const YAML::Node value = node(key);
  try {
    return value.as<bool>();
  } catch (const YAML::Exception&) {
    fail(field(key), "expected true or false, got " + shown(value));
  }
}

std::string YamlFields::text(const std::string& key, const std::string& fallback) const {
  return has(key) ? required_text(key) : fallback;
}

std::string YamlFields::required_text(const std::string& key) const {
  if (!has(key)) fail(field(key), "missing");
  const YAML::Node value = node(key);
  if (!value.IsScalar() || value.Scalar().empty()) {
    fail(field(key), "expected a non-empty string, got " + shown(value));
  }
  return value.Scalar();
}

}  // namespace tessel::launcher
