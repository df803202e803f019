#include "tests/support/api_label_selector.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <set>
#include <stdexcept>

#include "tests/support/builtin_semantics_errors.h"

namespace tessel::testing {
namespace {

namespace v = validation;
using json = nlohmann::json;

enum class Token {
  kEnd,
  kClosedPar,
  kComma,
  kDoesNotExist,  // !
  kDoubleEquals,
  kEquals,
  kGreaterThan,
  kIdentifier,
  kIn,
  kLessThan,
  kNotEquals,
  kNotIn,
  kOpenPar
};

struct Scanned {
  Token token;
  std::string literal;
};

bool is_whitespace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool is_special(char c) {
  return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

// The whole selector as tokens, ending with kEnd. Operators are read greedily ("!=" and "=="
// before "!" and "="); anything else up to whitespace or an operator character is one
// identifier, "in" and "notin" being keywords.
std::vector<Scanned> scan(std::string_view text) {
  std::vector<Scanned> out;
  std::size_t i = 0;
  while (true) {
    while (i < text.size() && is_whitespace(text[i])) ++i;
    if (i == text.size()) {
      out.push_back({Token::kEnd, ""});
      return out;
    }
    const char c = text[i];
    if (is_special(c)) {
      const bool pair = i + 1 < text.size() && text[i + 1] == '=' && (c == '!' || c == '=');
      const std::string literal(text.substr(i, pair ? 2 : 1));
      i += literal.size();
      Token token = Token::kComma;
      if (literal == "!=")
        token = Token::kNotEquals;
      else if (literal == "==")
        token = Token::kDoubleEquals;
      else if (c == '=')
        token = Token::kEquals;
      else if (c == '!')
        token = Token::kDoesNotExist;
      else if (c == '(')
        token = Token::kOpenPar;
      else if (c == ')')
        token = Token::kClosedPar;
      else if (c == '>')
        token = Token::kGreaterThan;
      else if (c == '<')
        token = Token::kLessThan;
      out.push_back({token, literal});
      continue;
    }
    const std::size_t start = i;
    while (i < text.size() && !is_special(text[i]) && !is_whitespace(text[i])) ++i;
    std::string word(text.substr(start, i - start));
    const Token token = word == "in"      ? Token::kIn
                        : word == "notin" ? Token::kNotIn
                                          : Token::kIdentifier;
    out.push_back({token, std::move(word)});
  }
}

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message); }

std::string found(const std::string& literal, const std::string& expected) {
  return "found '" + literal + "', expected: " + expected;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

// A field error as apimachinery's field.Error prints it: "<path>: Invalid value: ...".
std::string invalid(const std::string& path, const std::string& value, const std::string& detail) {
  const FieldError error = v::invalid(path, value, detail);
  return error.field + ": " + error.message;
}

// labels.Parse checks a key without a field path, which Go prints as "<nil>".
void check_key(const std::string& key) {
  const std::vector<std::string> problems = v::qualified_name(key);
  if (!problems.empty()) fail(invalid("<nil>", key, join(problems, "; ")));
}

bool parses_as_int64(const std::string& text) {
  std::int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+') {  // Go's ParseInt takes one leading sign, '+' too
    ++begin;
    if (begin != end && *begin == '-') return false;
  }
  const auto [stop, error] = std::from_chars(begin, end, value);
  return error == std::errc() && stop == end && begin != end;
}

// apimachinery's NewRequirement: the values' checks, all problems together ("[a, b]" when
// more than one, as an aggregated error prints).
LabelRequirement make_requirement(std::string key, LabelOperator op,
                                  std::set<std::string> value_set) {
  std::vector<std::string> values(value_set.begin(), value_set.end());
  std::vector<std::string> problems;
  const auto add = [&](std::string problem) {
    if (std::find(problems.begin(), problems.end(), problem) == problems.end()) {
      problems.push_back(std::move(problem));
    }
  };
  if (op == LabelOperator::kGreaterThan || op == LabelOperator::kLessThan) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!parses_as_int64(values[i])) {
        add(invalid(v::index("values", i), values[i],
                    "for 'Gt', 'Lt' operators, the value must be an integer"));
      }
    }
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::vector<std::string> value_problems = v::label_value(values[i]);
    if (!value_problems.empty()) {
      add(invalid(v::index("values", i) + "[" + key + "]", values[i], join(value_problems, "; ")));
    }
  }
  if (problems.size() == 1) fail(problems.front());
  if (problems.size() > 1) fail("[" + join(problems, ", ") + "]");
  return {std::move(key), op, std::move(values)};
}

// The recursive-descent parser of labels.Parse over the scanned tokens. Where "in" and "notin"
// stand in place of a key or value they are identifiers; only where an operator is expected
// are they keywords.
class Parser {
 public:
  explicit Parser(std::string_view text) : tokens_(scan(text)) {}

  std::vector<LabelRequirement> parse() {
    std::vector<LabelRequirement> requirements;
    while (true) {
      const Scanned& next = peek(true);
      if (next.token == Token::kEnd) return requirements;
      if (next.token != Token::kIdentifier && next.token != Token::kDoesNotExist) {
        fail(found(next.literal, "!, identifier, or 'end of string'"));
      }
      try {
        requirements.push_back(requirement());
      } catch (const std::invalid_argument& error) {
        fail(std::string("unable to parse requirement: ") + error.what());
      }
      const Scanned after = take(true);
      if (after.token == Token::kEnd) return requirements;
      if (after.token != Token::kComma) fail(found(after.literal, "',' or 'end of string'"));
      const Scanned& following = peek(true);
      if (following.token != Token::kIdentifier && following.token != Token::kDoesNotExist) {
        fail(found(following.literal, "identifier after ','"));
      }
    }
  }

 private:
  // The token at the current position; as_value: "in" and "notin" read as identifiers.
  Scanned peek(bool as_value) const {
    Scanned s = tokens_[std::min(position_, tokens_.size() - 1)];
    if (as_value && (s.token == Token::kIn || s.token == Token::kNotIn))
      s.token = Token::kIdentifier;
    return s;
  }
  Scanned take(bool as_value) {
    Scanned s = peek(as_value);
    ++position_;
    return s;
  }

  LabelRequirement requirement() {
    bool negated = false;
    Scanned key = take(true);
    if (key.token == Token::kDoesNotExist) {
      negated = true;
      key = take(true);
    }
    if (key.token != Token::kIdentifier) fail(found(key.literal, "identifier"));
    check_key(key.literal);
    const Token next = peek(true).token;
    // "!k" is complete whatever follows (what follows is then not a ',' and is refused).
    if (negated) return make_requirement(key.literal, LabelOperator::kDoesNotExist, {});
    if (next == Token::kEnd || next == Token::kComma) {
      return make_requirement(key.literal, LabelOperator::kExists, {});
    }
    const Scanned op = take(false);
    switch (op.token) {
      case Token::kIn:
        return make_requirement(key.literal, LabelOperator::kIn, value_list());
      case Token::kNotIn:
        return make_requirement(key.literal, LabelOperator::kNotIn, value_list());
      case Token::kEquals:
        return make_requirement(key.literal, LabelOperator::kEquals, exact_value());
      case Token::kDoubleEquals:
        return make_requirement(key.literal, LabelOperator::kDoubleEquals, exact_value());
      case Token::kNotEquals:
        return make_requirement(key.literal, LabelOperator::kNotEquals, exact_value());
      case Token::kGreaterThan:
        return make_requirement(key.literal, LabelOperator::kGreaterThan, exact_value());
      case Token::kLessThan:
        return make_requirement(key.literal, LabelOperator::kLessThan, exact_value());
      default:
        fail(found(op.literal, "in, notin, =, ==, !=, gt, lt"));
    }
  }

  // "(a,b)"; empty entries ("()", "(a,,b)", "(,a)") are the empty value.
  std::set<std::string> value_list() {
    const Scanned open = take(true);
    if (open.token != Token::kOpenPar) fail("found '" + open.literal + "' expected: '('");
    const Scanned first = peek(true);
    if (first.token == Token::kClosedPar) {
      take(true);
      return {""};
    }
    if (first.token != Token::kIdentifier && first.token != Token::kComma) {
      fail(found(first.literal, "',', ')' or identifier"));
    }
    std::set<std::string> values;
    while (true) {
      const Scanned item = take(true);
      if (item.token == Token::kIdentifier) {
        values.insert(item.literal);
        const Scanned after = peek(true);
        if (after.token == Token::kClosedPar) break;
        if (after.token != Token::kComma) fail(found(after.literal, "',' or ')'"));
      } else if (item.token == Token::kComma) {
        if (values.empty()) values.insert("");
        const Token after = peek(true).token;
        if (after == Token::kClosedPar) {
          values.insert("");
          break;
        }
        if (after == Token::kComma) {
          take(true);
          values.insert("");
        }
      } else {
        fail(found(item.literal, "',', or identifier"));
      }
    }
    take(true);  // the ')' seen above
    return values;
  }

  // The value after =, ==, !=, > or <; none before ',' or the end is the empty value.
  std::set<std::string> exact_value() {
    const Token next = peek(true).token;
    if (next == Token::kEnd || next == Token::kComma) return {""};
    const Scanned value = take(true);
    if (value.token != Token::kIdentifier) fail(found(value.literal, "identifier"));
    return {value.literal};
  }

  std::vector<Scanned> tokens_;
  std::size_t position_ = 0;
};

bool parse_int64(const std::string& text, std::int64_t& value) {
  if (!parses_as_int64(text)) return false;
  const char* begin = text.data() + (text.starts_with('+') ? 1 : 0);
  std::from_chars(begin, text.data() + text.size(), value);
  return true;
}

}  // namespace

bool LabelRequirement::matches(const std::map<std::string, std::string>& labels) const {
  const auto found_label = labels.find(key);
  const bool present = found_label != labels.end();
  const auto listed = [&] {
    return std::find(values.begin(), values.end(), found_label->second) != values.end();
  };
  switch (op) {
    case LabelOperator::kIn:
    case LabelOperator::kEquals:
    case LabelOperator::kDoubleEquals:
      return present && listed();
    case LabelOperator::kNotIn:
    case LabelOperator::kNotEquals:
      return !present || !listed();
    case LabelOperator::kExists:
      return present;
    case LabelOperator::kDoesNotExist:
      return !present;
    case LabelOperator::kGreaterThan:
    case LabelOperator::kLessThan: {
      std::int64_t label = 0;
      std::int64_t bound = 0;
      if (!present || values.size() != 1 || !parse_int64(found_label->second, label) ||
          !parse_int64(values.front(), bound)) {
        return false;
      }
      return op == LabelOperator::kGreaterThan ? label > bound : label < bound;
    }
  }
  return false;
}

LabelSelector LabelSelector::parse(std::string_view text) {
  LabelSelector selector;
  selector.requirements_ = Parser(text).parse();
  std::stable_sort(
      selector.requirements_.begin(), selector.requirements_.end(),
      [](const LabelRequirement& a, const LabelRequirement& b) { return a.key < b.key; });
  return selector;
}

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
  return std::all_of(requirements_.begin(), requirements_.end(),
                     [&](const LabelRequirement& r) { return r.matches(labels); });
}

bool LabelSelector::matches(const json& object) const {
  std::map<std::string, std::string> labels;
  if (object.is_object()) {
    const json metadata = object.value("metadata", json::object());
    const json declared = metadata.is_object() ? metadata.value("labels", json::object()) : json();
    if (declared.is_object()) {
      for (const auto& [key, value] : declared.items()) {
        if (value.is_string()) labels[key] = value.get<std::string>();
      }
    }
  }
  return matches(labels);
}

}  // namespace tessel::testing
