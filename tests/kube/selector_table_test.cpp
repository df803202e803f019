// kube/'s label and field selector parsers against the selector table the API test server
// passes too (tests/support/testdata/selectors.json: the captured fixtures' selectors and,
// beyond them, what k8s.io/apimachinery v0.26.4, i.e. kube-apiserver v1.26, accepts and
// refuses). The table is read here through kube/'s parsers only, so the client and the test
// server are two independent readings of it.
//
// Valid selectors: the requirements (the client keeps `==` as `=`: one operator, spelled two
// ways), every matching case, and the round trip through to_string(). Invalid ones: refused,
// the client's message naming the selector and the fault the server names (the token found,
// the bad key or value, the term, the character or escape), in the client's own words.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>

#include "kube/object.h"

namespace tessel::kube {
namespace {

using json = nlohmann::json;

const json& table() {
  static const json parsed = [] {
    const std::string path =
        std::string(TESSEL_SOURCE_DIR) + "/tests/support/testdata/selectors.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return json::parse(in);
  }();
  return parsed;
}

std::string table_name(SelectorOperator op) {
  switch (op) {
    case SelectorOperator::kEquals:
      return "=";
    case SelectorOperator::kNotEquals:
      return "!=";
    case SelectorOperator::kIn:
      return "in";
    case SelectorOperator::kNotIn:
      return "notin";
    case SelectorOperator::kExists:
      return "exists";
    case SelectorOperator::kDoesNotExist:
      return "!";
    case SelectorOperator::kGreaterThan:
      return "gt";
    case SelectorOperator::kLessThan:
      return "lt";
  }
  return "?";
}

json label_requirements(const LabelSelector& selector) {
  json requirements = json::array();
  for (const LabelRequirement& r : selector.requirements()) {
    requirements.push_back({r.key, table_name(r.op), r.values});
  }
  return requirements;
}

json field_requirements(const FieldSelector& selector) {
  json requirements = json::array();
  for (const FieldRequirement& r : selector.requirements()) {
    requirements.push_back({r.field, r.equals ? "=" : "!=", r.value});
  }
  return requirements;
}

template <typename Selector>
std::optional<std::string> parse_error(const std::string& text) {
  try {
    Selector::parse(text);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return std::nullopt;
}

// What the client's message must contain for the fault kube-apiserver's message names.
std::string culprit_of(const std::string& server_message) {
  std::smatch m;
  if (std::regex_search(server_message, m, std::regex("found '([^']*)'"))) {
    return m[1].str().empty() ? "found end of string" : "found '" + m[1].str() + "'";
  }
  if (std::regex_search(server_message, m, std::regex("Invalid value: (\"[^\"]*\")"))) {
    return m[1].str();
  }
  if (std::regex_search(server_message, m, std::regex("can't understand '(.*)'$"))) {
    return "term \"" + m[1].str() + "\": no operator";
  }
  if (std::regex_search(server_message, m, std::regex("unescaped character in value: (\\d+)$"))) {
    return std::string("unescaped '") + static_cast<char>(std::stoi(m[1].str())) + "'";
  }
  if (std::regex_search(server_message, m, std::regex("invalid escape sequence: (.*)$"))) {
    return "'" + m[1].str() + "'";
  }
  ADD_FAILURE() << "the table's message names no fault this test knows: " << server_message;
  return server_message;
}

TEST(LabelSelectorTableTest, EveryCaseParsesMatchesOrIsRefusedAsKubeApiserverDoes) {
  ASSERT_GE(table().at("label").size(), 30u);
  int valid = 0, invalid = 0;
  for (const json& c : table().at("label")) {
    const std::string text = c.at("selector");
    SCOPED_TRACE("labelSelector=" + text);
    if (c.contains("error")) {
      ++invalid;
      const auto error = parse_error<LabelSelector>(text);
      ASSERT_TRUE(error) << "accepted; kube-apiserver refuses it: " << c["error"];
      EXPECT_NE(error->find("invalid label selector \"" + text + "\": "), std::string::npos)
          << *error;
      EXPECT_NE(error->find(culprit_of(c["error"])), std::string::npos)
          << *error << "\nkube-apiserver: " << c["error"];
      continue;
    }
    ++valid;
    const LabelSelector selector = LabelSelector::parse(text);
    json expected = c.at("requirements");
    for (json& r : expected) {
      if (r[1] == "==") r[1] = "=";
    }
    EXPECT_EQ(label_requirements(selector), expected);
    const LabelSelector again = LabelSelector::parse(selector.to_string());
    EXPECT_EQ(label_requirements(again), label_requirements(selector)) << selector.to_string();
    for (const json& check : c.at("cases")) {
      const auto labels = check.at("labels").get<std::map<std::string, std::string>>();
      const bool want = check.at("matches");
      EXPECT_EQ(selector.matches(labels), want) << check["labels"];
      EXPECT_EQ(selector.matches(json{{"metadata", {{"labels", check["labels"]}}}}), want);
      EXPECT_EQ(again.matches(labels), want) << selector.to_string() << " on " << check["labels"];
    }
  }
  EXPECT_GT(valid, 0);
  EXPECT_GT(invalid, 0);
}

TEST(FieldSelectorTableTest, EveryCaseParsesMatchesOrIsRefusedAsKubeApiserverDoes) {
  ASSERT_GE(table().at("field").size(), 12u);
  int valid = 0, invalid = 0;
  for (const json& c : table().at("field")) {
    const std::string text = c.at("selector");
    SCOPED_TRACE("fieldSelector=" + text);
    if (c.contains("error")) {
      ++invalid;
      const auto error = parse_error<FieldSelector>(text);
      ASSERT_TRUE(error) << "accepted; kube-apiserver refuses it: " << c["error"];
      EXPECT_NE(error->find("invalid field selector \"" + text + "\": "), std::string::npos)
          << *error;
      EXPECT_NE(error->find(culprit_of(c["error"])), std::string::npos)
          << *error << "\nkube-apiserver: " << c["error"];
      continue;
    }
    ++valid;
    const FieldSelector selector = FieldSelector::parse(text);
    EXPECT_EQ(field_requirements(selector), c.at("requirements"));
    const FieldSelector again = FieldSelector::parse(selector.to_string());
    EXPECT_EQ(field_requirements(again), field_requirements(selector)) << selector.to_string();
    for (const json& check : c.at("cases")) {
      EXPECT_EQ(selector.matches(check.at("object")), check.at("matches").get<bool>())
          << check["object"];
    }
  }
  EXPECT_GT(valid, 0);
  EXPECT_GT(invalid, 0);
}

// --- beyond the table: the client's own API -------------------------------------------------

// apimachinery's value-list reader takes an empty value between two commas only when a value
// or another comma follows; `(,)` and `(a,)` are fine.
TEST(LabelSelectorGrammarTest, EmptyValuesInAListAreReadAsKubeApiserverReadsThem) {
  EXPECT_EQ(label_requirements(LabelSelector::parse("x in (,)")),
            json::parse(R"([["x","in",[""]]])"));
  EXPECT_EQ(label_requirements(LabelSelector::parse("x in (a,)")),
            json::parse(R"([["x","in",["","a"]]])"));
  EXPECT_EQ(label_requirements(LabelSelector::parse("x in (,,a)")),
            json::parse(R"([["x","in",["","a"]]])"));
  const auto error = parse_error<LabelSelector>("x in (a,,)");
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("found ')', expected ',' or a value"), std::string::npos) << *error;
}

TEST(LabelSelectorGrammarTest, InAndNotinAreKeysAndValuesWhereNoOperatorCanStand) {
  EXPECT_EQ(label_requirements(LabelSelector::parse("notin notin (in),!in")),
            json::parse(R"([["in","!",[]],["notin","notin",["in"]]])"));
  EXPECT_EQ(label_requirements(LabelSelector::parse("a==notin")),
            json::parse(R"([["a","=",["notin"]]])"));
}

TEST(LabelSelectorGrammarTest, GreaterAndLessCompareIntegerLabelsOnly) {
  const LabelSelector selector = LabelSelector::parse("gpus>3,rank<10");
  EXPECT_EQ(selector.to_string(), "gpus>3,rank<10");
  using Labels = std::map<std::string, std::string>;
  EXPECT_TRUE(selector.matches(Labels{{"gpus", "4"}, {"rank", "9"}}));
  EXPECT_FALSE(selector.matches(Labels{{"gpus", "3"}, {"rank", "9"}}));
  EXPECT_FALSE(selector.matches(Labels{{"gpus", "4"}, {"rank", "10"}}));
  EXPECT_FALSE(selector.matches(Labels{{"gpus", "4.5"}, {"rank", "9"}}));
  EXPECT_FALSE(selector.matches(Labels{{"gpus", "99999999999999999999"}, {"rank", "9"}}));
  EXPECT_FALSE(selector.matches(Labels{{"rank", "9"}}));
  EXPECT_TRUE(LabelSelector::parse("a>007").matches(Labels{{"a", "8"}}));
  const auto overflow = parse_error<LabelSelector>("a>99999999999999999999");
  ASSERT_TRUE(overflow);
  EXPECT_NE(overflow->find("must be a decimal integer"), std::string::npos) << *overflow;
}

TEST(LabelSelectorGrammarTest, ConstructedRequirementsAreCheckedAndOrderedLikeParsedOnes) {
  const LabelSelector selector(
      {{"zone", SelectorOperator::kIn, {"b", "a", "b"}}, {"app", SelectorOperator::kExists, {}}});
  EXPECT_EQ(selector.to_string(), "app,zone in (a,b)");
  EXPECT_EQ(label_requirements(LabelSelector::parse(selector.to_string())),
            label_requirements(selector));
  EXPECT_THROW(LabelSelector({{"-a", SelectorOperator::kExists, {}}}), std::invalid_argument);
  EXPECT_THROW(LabelSelector({{"a", SelectorOperator::kEquals, {"x", "y"}}}),
               std::invalid_argument);
  EXPECT_THROW(LabelSelector({{"a", SelectorOperator::kIn, {}}}), std::invalid_argument);
  EXPECT_THROW(LabelSelector({{"a", SelectorOperator::kEquals, {"a,b"}}}), std::invalid_argument);
  EXPECT_THROW(LabelSelector({{"a", SelectorOperator::kLessThan, {"x"}}}), std::invalid_argument);
}

TEST(FieldSelectorGrammarTest, ValuesAreEscapedWhenWrittenAndReadBack) {
  const FieldSelector selector({{"metadata.name", true, R"(a,b=c\d)"}, {"spec.x", false, "y"}});
  EXPECT_EQ(selector.to_string(), R"(metadata.name=a\,b\=c\\d,spec.x!=y)");
  EXPECT_EQ(field_requirements(FieldSelector::parse(selector.to_string())),
            field_requirements(selector));
  json object = {{"metadata", {{"name", R"(a,b=c\d)"}}}};
  EXPECT_TRUE(selector.matches(object));
}

TEST(FieldSelectorGrammarTest, FieldsThatCannotBeWrittenAreRefused) {
  for (const char* field : {"a=b", "a!", "a,b", "a==b"}) {
    SCOPED_TRACE(field);
    try {
      FieldSelector({{field, true, "v"}});
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(std::string("\"") + field + "\""), std::string::npos)
          << error.what();
    }
  }
  EXPECT_NO_THROW(FieldSelector({{"", true, "v"}}));  // the server decides which fields exist
}

TEST(FieldSelectorGrammarTest, TermsAreSplitAtTheFirstOperatorAndSortedByTheirText) {
  EXPECT_EQ(field_requirements(FieldSelector::parse(R"(b!=\=,a!b==x)")),
            json::parse(R"([["a!b","=","x"],["b","!=","="]])"));
  // `!==` is `!=` and then an unescaped `=`.
  const auto error = parse_error<FieldSelector>("b!==");
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("term \"b!==\": unescaped '='"), std::string::npos) << *error;
}

}  // namespace
}  // namespace tessel::kube
