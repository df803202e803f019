// ?labelSelector= as kube-apiserver v1.26 reads it: the grammar, checks and error messages of
// k8s.io/apimachinery's labels.Parse (terms `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a)`,
// `k`, `!k`, `k>n`, `k<n`, comma-separated, all of which must hold). The server's own reading,
// independent of kube/'s client code, so that a bug on one side shows against the other.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::testing {

enum class LabelOperator {
  kIn,
  kNotIn,
  kEquals,
  kDoubleEquals,
  kNotEquals,
  kExists,
  kDoesNotExist,
  kGreaterThan,
  kLessThan
};

struct LabelRequirement {
  std::string key;
  LabelOperator op = LabelOperator::kExists;
  std::vector<std::string> values;  // sorted, without duplicates (labels.Parse keeps a set)

  bool matches(const std::map<std::string, std::string>& labels) const;
  bool operator==(const LabelRequirement&) const = default;
};

class LabelSelector {
 public:
  LabelSelector() = default;  // matches everything

  // Throws std::invalid_argument whose what() is kube-apiserver's message for the selector
  // (the Status message of its 400 answer), e.g. "unable to parse requirement: found '',
  // expected: in, notin, =, ==, !=, gt, lt" or "found ',', expected: !, identifier, or 'end of
  // string'".
  static LabelSelector parse(std::string_view text);

  bool matches(const std::map<std::string, std::string>& labels) const;
  bool matches(const nlohmann::json& object) const;  // against metadata.labels
  bool empty() const { return requirements_.empty(); }
  // Sorted by key, as labels.Parse leaves them.
  const std::vector<LabelRequirement>& requirements() const { return requirements_; }

 private:
  std::vector<LabelRequirement> requirements_;
};

}  // namespace tessel::testing
