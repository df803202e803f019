// Label selectors in the string form of ?labelSelector=, read as kube-apiserver reads them
// (k8s.io/apimachinery v0.26 labels.Parse): comma-joined requirements `k=v` (or `k==v`),
// `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>1`, `k<10`, `k` (exists) and `!k` (does not
// exist); blanks between tokens are ignored. All requirements must hold.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::kube {

// `==` is the same operator as `=` (the server keeps the spelling only to print it back).
enum class SelectorOperator {
  kEquals,
  kNotEquals,
  kIn,
  kNotIn,
  kExists,
  kDoesNotExist,
  kGreaterThan,  // `k>n`: the label is an integer greater than n
  kLessThan,     // `k<n`: the label is an integer less than n
};

struct LabelRequirement {
  std::string key;  // a qualified name: [DNS-subdomain prefix '/'] name
  SelectorOperator op = SelectorOperator::kExists;
  // One for =, != (a label value, possibly empty), > and < (a decimal integer); one or more,
  // sorted and unique, for in and notin (`k in ()` holds the one value ""); none for exists
  // and does-not-exist.
  std::vector<std::string> values;
};

class LabelSelector {
 public:
  LabelSelector() = default;  // empty: matches everything
  // Checks each requirement's key, value count and values, then orders them as the server
  // does: values sorted and unique, requirements (stably) by key. Throws
  // std::invalid_argument naming the requirement and its fault.
  explicit LabelSelector(std::vector<LabelRequirement> requirements);

  // Throws std::invalid_argument: `invalid label selector "<text>": [term "<term>": ]<fault>`,
  // the fault naming the token found and what was expected, or the bad key or value.
  static LabelSelector parse(std::string_view text);

  bool matches(const std::map<std::string, std::string>& labels) const;
  bool matches(const nlohmann::json& obj) const;  // against metadata.labels
  std::string to_string() const;                  // parse(to_string()) gives back *this
  bool empty() const { return requirements_.empty(); }
  const std::vector<LabelRequirement>& requirements() const { return requirements_; }

 private:
  std::vector<LabelRequirement> requirements_;
};

}  // namespace tessel::kube
