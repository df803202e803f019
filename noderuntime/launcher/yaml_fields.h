// Typed reads of one YAML mapping whose errors name the file, the field's full path and the
// reason, e.g. "job.yaml: training.steps: expected an integer >= 1, got 'ten'".
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

namespace tessel::launcher {

// Any bad input to `tessel local`: the message names the file and the field.
class LocalJobError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class YamlFields {
 public:
  // Throws LocalJobError when node is not a mapping. path is "" for the document.
  YamlFields(YAML::Node node, std::string path, std::string source);

  [[noreturn]] void fail(const std::string& field, const std::string& why) const;
  std::string field(const std::string& key) const;  // "training.steps"
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }

  // Rejects any key not in `keys`, naming it.
  void allow(const std::set<std::string>& keys) const;
  bool has(const std::string& key) const;
  YAML::Node node(const std::string& key) const { return node_[key]; }
  // The sub-mapping at key; throws when it is missing or not a mapping.
  YamlFields section(const std::string& key) const;

  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) const;
  int64_t required_integer(const std::string& key, int64_t min, int64_t max) const;
  uint64_t unsigned_integer(const std::string& key, uint64_t fallback) const;
  // A finite number in [min, max]; exclusive_min makes the lower bound strict.
  double number(const std::string& key, double fallback, double min, double max,
                bool exclusive_min = false) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string text(const std::string& key, const std::string& fallback) const;
  std::string required_text(const std::string& key) const;

 private:
  YAML::Node node_;
  std::string path_;
  std::string source_;
};

}  // namespace tessel::launcher
