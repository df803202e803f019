// The API test server's own selector parsers against the shared selector table
// (tests/support/testdata/selectors.json: the fixtures' selectors and, beyond them,
// apimachinery v0.26.4's grammar and messages), and a list's 400 answers to bad selectors.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "tests/kube/fixtures.h"
#include "tests/support/api_errors.h"
#include "tests/support/api_field_selector.h"
#include "tests/support/api_label_selector.h"
#include "tests/support/api_list.h"
#include "tests/support/api_resources.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

const json& table() {
  static const json parsed = [] {
    std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/tests/support/testdata/selectors.json");
    if (!in) throw std::runtime_error("cannot open tests/support/testdata/selectors.json");
    return json::parse(in);
  }();
  return parsed;
}

std::string operator_name(LabelOperator op) {
  switch (op) {
    case LabelOperator::kIn:
      return "in";
    case LabelOperator::kNotIn:
      return "notin";
    case LabelOperator::kEquals:
      return "=";
    case LabelOperator::kDoubleEquals:
      return "==";
    case LabelOperator::kNotEquals:
      return "!=";
    case LabelOperator::kExists:
      return "exists";
    case LabelOperator::kDoesNotExist:
      return "!";
    case LabelOperator::kGreaterThan:
      return "gt";
    case LabelOperator::kLessThan:
      return "lt";
  }
  return "?";
}

template <typename Selector>
std::string parse_error(const std::string& text) {
  try {
    Selector::parse(text);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST(LabelSelectorTable, EveryCaseParsesMatchesOrFailsAsKubeApiserverDoes) {
  ASSERT_GE(table()["label"].size(), 30u);
  for (const json& c : table()["label"]) {
    const std::string text = c["selector"];
    SCOPED_TRACE("labelSelector=" + text);
    if (c.contains("error")) {
      EXPECT_EQ(parse_error<LabelSelector>(text), c["error"].get<std::string>());
      continue;
    }
    const LabelSelector selector = LabelSelector::parse(text);
    json requirements = json::array();
    for (const LabelRequirement& r : selector.requirements()) {
      requirements.push_back({r.key, operator_name(r.op), r.values});
    }
    EXPECT_EQ(requirements, c["requirements"]);
    for (const json& check : c["cases"]) {
      const auto labels = check["labels"].get<std::map<std::string, std::string>>();
      EXPECT_EQ(selector.matches(labels), check["matches"].get<bool>()) << check["labels"];
      EXPECT_EQ(selector.matches(json{{"metadata", {{"labels", check["labels"]}}}}),
                check["matches"].get<bool>());
    }
  }
}

TEST(FieldSelectorTable, EveryCaseParsesMatchesOrFailsAsKubeApiserverDoes) {
  ASSERT_GE(table()["field"].size(), 12u);
  for (const json& c : table()["field"]) {
    const std::string text = c["selector"];
    SCOPED_TRACE("fieldSelector=" + text);
    if (c.contains("error")) {
      EXPECT_EQ(parse_error<FieldSelector>(text), c["error"].get<std::string>());
      continue;
    }
    const FieldSelector selector = FieldSelector::parse(text);
    json requirements = json::array();
    for (const FieldRequirement& r : selector.requirements()) {
      requirements.push_back({r.field, r.equals ? "=" : "!=", r.value});
    }
    EXPECT_EQ(requirements, c["requirements"]);
    for (const json& check : c["cases"]) {
      EXPECT_EQ(selector.matches(check["object"]), check["matches"].get<bool>()) << check["object"];
    }
  }
}

TEST(FieldSelector, RequiredValueIsTheFirstEqualityTermOfTheField) {
  EXPECT_EQ(
      FieldSelector::parse("metadata.name!=a,metadata.name=b").required_value("metadata.name"),
      "b");
  EXPECT_FALSE(FieldSelector::parse("metadata.name!=a").required_value("metadata.name"));
  EXPECT_FALSE(FieldSelector().required_value("metadata.name"));
}

// The list's filter answers 400 BadRequest with the parser's message, the label selector
// first; a field the resource does not index is refused as the captured server refused it.
json filter_error(const std::string& resource, const std::string& label_selector,
                  const std::string& field_selector) {
  const ServedResources served;
  const auto type = served.find("", "v1", resource);
  if (!type) throw std::runtime_error("not served: " + resource);
  RequestOptions options;
  options.label_selector = label_selector;
  options.field_selector = field_selector;
  try {
    ObjectFilter filter(*type, options);
  } catch (const ApiError& error) {
    EXPECT_EQ(error.http_status(), 400);
    return error.body();
  }
  return nullptr;
}

TEST(ObjectFilter, BadSelectorsAreBadRequestsWithKubeApiserversMessage) {
  const json label = filter_error("pods", "a in (x", "");
  EXPECT_EQ(label["reason"], "BadRequest");
  EXPECT_EQ(label["code"], 400);
  EXPECT_EQ(label["message"], "unable to parse requirement: found '', expected: ',' or ')'");
  EXPECT_EQ(filter_error("pods", "=a", "a")["message"],
            "found '=', expected: !, identifier, or 'end of string'");
  EXPECT_EQ(filter_error("pods", "", "a")["message"],
            "invalid selector: 'a'; can't understand 'a'");
  EXPECT_TRUE(filter_error("pods", "a=b", "spec.nodeName=n,status.phase!=Failed").is_null());
}

TEST(ObjectFilter, UnsupportedFieldsAreRefusedInTheSelectorsTermOrder) {
  const json captured =
      kube::testing::fixture("400-list-fieldselector-unsupported.json")["response"]["body"];
  json answer = filter_error("configmaps", "", "spec.model=gpt3-1.3b");
  EXPECT_EQ(answer, captured);
  EXPECT_EQ(filter_error("configmaps", "", "z.y=1,spec.model=2")["message"],
            "field label not supported: spec.model");
  EXPECT_EQ(filter_error("pods", "", "metadata.name = x")["message"],
            "field label not supported: metadata.name ");
}

}  // namespace
}  // namespace tessel::testing
