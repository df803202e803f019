// The JSONPath dialect of kubectl and of kube-apiserver's printer columns
// (k8s.io/client-go/util/jsonpath, with missing keys allowed) for one expression: fields
// (.a.b, ['a.b'], .*), recursive descent (..name), indexes ([0], [-1]), slices ([1:3]),
// unions ([0,2]), wildcards ([*]) and filters ([?(@.type=="Ready")], [?(@.port>80)], [?(@.x)]).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::testing {

struct JsonPathStep;  // json_path.cpp

class JsonPath {
 public:
  // An expression as a CRD's jsonPath holds it: ".status.phase" (a leading "$" or the
  // template braces "{...}" are accepted too). Throws std::invalid_argument naming the
  // expression and what in it is not understood.
  static JsonPath parse(const std::string& expression);

  // Every value the path selects, in document order; nothing for missing keys, for fields of
  // non-objects and for indexes out of range.
  std::vector<nlohmann::json> evaluate(const nlohmann::json& document) const;

  const std::string& expression() const { return expression_; }

 private:
  JsonPath(std::string expression, std::shared_ptr<const std::vector<JsonPathStep>> steps);

  std::string expression_;
  std::shared_ptr<const std::vector<JsonPathStep>> steps_;
};

// A value as the JSONPath printer prints it (Go's fmt.Print of the decoded value): strings
// bare, numbers and booleans plain, objects as map[k:v ...], arrays as [a b].
std::string json_path_text(const nlohmann::json& value);

}  // namespace tessel::testing
