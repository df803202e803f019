#include "kube/label_selector.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <stdexcept>

#include "kube/object.h"

namespace tessel::kube {
namespace {

// --- keys and values ------------------------------------------------------------------------

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9], or one alphanumeric.
bool is_name_text(std::string_view text) {
  return !text.empty() && is_alnum(text.front()) && is_alnum(text.back()) &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A lowercase RFC 1123 subdomain: dot-separated labels of [a-z0-9-], each starting and ending
// with [a-z0-9].
bool is_dns_subdomain(std::string_view text) {
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = text.find('.', start);
    const std::string_view label = text.substr(start, dot - start);
    if (label.empty() || !is_lower_alnum(label.front()) || !is_lower_alnum(label.back()) ||
        !std::all_of(label.begin(), label.end(),
                     [](char c) { return is_lower_alnum(c) || c == '-'; })) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

constexpr std::size_t kMaxNameLength = 63;     // a label name, and a label value
constexpr std::size_t kMaxPrefixLength = 253;  // a DNS subdomain

// What is wrong with a label key (apimachinery's IsQualifiedName), or nullopt.
std::optional<std::string> key_fault(std::string_view key) {
  const std::string quoted = "invalid key \"" + std::string(key) + "\": ";
  if (std::count(key.begin(), key.end(), '/') > 1) {
    return quoted + "a key is a name with an optional DNS-subdomain prefix and one '/'";
  }
  const std::size_t slash = key.find('/');
  std::string_view name = key;
  if (slash != std::string_view::npos) {
    const std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty()) return quoted + "the prefix before '/' is empty";
    if (prefix.size() > kMaxPrefixLength) {
      return quoted + "the prefix is longer than " + std::to_string(kMaxPrefixLength) +
             " characters";
    }
    if (!is_dns_subdomain(prefix)) {
      return quoted +
             "the prefix must be a lowercase DNS subdomain (dot-separated parts of [a-z0-9-], "
             "each starting and ending with [a-z0-9])";
    }
  }
  if (name.empty()) return quoted + "the name is empty";
  if (name.size() > kMaxNameLength) {
    return quoted + "the name is longer than " + std::to_string(kMaxNameLength) + " characters";
  }
  if (!is_name_text(name)) {
    return quoted + "the name must consist of [A-Za-z0-9-_.] and start and end with [A-Za-z0-9]";
  }
  return std::nullopt;
}

// What is wrong with a label value (apimachinery's IsValidLabelValue), or nullopt.
std::optional<std::string> value_fault(std::string_view key, std::string_view value) {
  const std::string quoted =
      "invalid value \"" + std::string(value) + "\" for key \"" + std::string(key) + "\": ";
  if (value.size() > kMaxNameLength) {
    return quoted + "longer than " + std::to_string(kMaxNameLength) + " characters";
  }
  if (!value.empty() && !is_name_text(value)) {
    return quoted +
           "a label value is empty or consists of [A-Za-z0-9-_.], starting and ending with "
           "[A-Za-z0-9]";
  }
  return std::nullopt;
}

// Go's strconv.ParseInt(text, 10, 64): an optional sign, then decimal digits, in range.
std::optional<std::int64_t> parse_int64(std::string_view text) {
  if (text.starts_with('+')) {
    text.remove_prefix(1);
    if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  }
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

const char* operator_text(SelectorOperator op) {
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
      return ">";
    case SelectorOperator::kLessThan:
      return "<";
  }
  return "?";
}

// What is wrong with a requirement's values for its operator (apimachinery's NewRequirement,
// the key checked before), or nullopt. Values are sorted and unique by then.
std::optional<std::string> values_fault(const LabelRequirement& r) {
  const std::string op = std::string("operator '") + operator_text(r.op) + "'";
  switch (r.op) {
    case SelectorOperator::kIn:
    case SelectorOperator::kNotIn:
      if (r.values.empty()) return op + " of key \"" + r.key + "\" needs at least one value";
      break;
    case SelectorOperator::kEquals:
    case SelectorOperator::kNotEquals:
      if (r.values.size() != 1) return op + " of key \"" + r.key + "\" needs exactly one value";
      break;
    case SelectorOperator::kExists:
    case SelectorOperator::kDoesNotExist:
      if (!r.values.empty()) return op + " of key \"" + r.key + "\" takes no value";
      break;
    case SelectorOperator::kGreaterThan:
    case SelectorOperator::kLessThan:
      if (r.values.size() != 1) return op + " of key \"" + r.key + "\" needs exactly one value";
      if (!parse_int64(r.values.front())) {
        return "value \"" + r.values.front() + "\" of " + op + " must be a decimal integer";
      }
      break;
  }
  for (const std::string& value : r.values) {
    if (auto fault = value_fault(r.key, value)) return fault;
  }
  return std::nullopt;
}

void sort_unique(std::vector<std::string>& values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

// --- tokens ---------------------------------------------------------------------------------

enum class TokenKind {
  kEnd,
  kWord,  // a key or a value; `in` and `notin` are words too where no operator can stand
  kIn,
  kNotIn,
  kEquals,
  kDoubleEquals,
  kNotEquals,
  kNot,
  kGreater,
  kLess,
  kComma,
  kOpen,
  kClose,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;
  std::size_t offset = 0;
};

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool is_symbol(char c) {
  return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

TokenKind symbol_kind(char c, bool equals_follows) {
  switch (c) {
    case '=':
      return equals_follows ? TokenKind::kDoubleEquals : TokenKind::kEquals;
    case '!':
      return equals_follows ? TokenKind::kNotEquals : TokenKind::kNot;
    case '(':
      return TokenKind::kOpen;
    case ')':
      return TokenKind::kClose;
    case ',':
      return TokenKind::kComma;
    case '>':
      return TokenKind::kGreater;
    default:
      return TokenKind::kLess;
  }
}

// A word runs to the next blank or symbol; a symbol is one character, or `==` / `!=`.
std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (true) {
    while (i < text.size() && is_blank(text[i])) ++i;
    if (i == text.size()) {
      tokens.push_back({TokenKind::kEnd, {}, i});
      return tokens;
    }
    const std::size_t start = i;
    TokenKind kind;
    if (is_symbol(text[i])) {
      kind = symbol_kind(text[i], i + 1 < text.size() && text[i + 1] == '=');
      i += kind == TokenKind::kDoubleEquals || kind == TokenKind::kNotEquals ? 2 : 1;
    } else {
      while (i < text.size() && !is_symbol(text[i]) && !is_blank(text[i])) ++i;
      const std::string_view word = text.substr(start, i - start);
      kind = word == "in" ? TokenKind::kIn : word == "notin" ? TokenKind::kNotIn : TokenKind::kWord;
    }
    tokens.push_back({kind, text.substr(start, i - start), start});
  }
}

bool is_word(const Token& token) {
  return token.kind == TokenKind::kWord || token.kind == TokenKind::kIn ||
         token.kind == TokenKind::kNotIn;
}

std::string describe(const Token& token) {
  if (token.kind == TokenKind::kEnd) return "end of string";
  return "'" + std::string(token.text) + "'";
}

// --- the parser -----------------------------------------------------------------------------

// Recursive descent over the grammar
//   selector    := "" | requirement ("," requirement)*
//   requirement := "!" KEY | KEY [ ("in" | "notin") "(" values ")" | ("=" | "==" | "!=" | ">"
//                  | "<") [VALUE] ]
// checking each key as soon as it is read and the values once a requirement is complete, in
// the order kube-apiserver does, so the first fault reported is the one the server reports.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), tokens_(tokenize(text)) {}

  std::vector<LabelRequirement> parse() {
    std::vector<LabelRequirement> requirements;
    if (peek().kind == TokenKind::kEnd) return requirements;
    if (!starts_requirement(peek())) fail(peek(), "a key, '!' or end of string");
    while (true) {
      term_start_ = peek().offset;
      requirements.push_back(requirement());
      const Token& after = next();
      if (after.kind == TokenKind::kEnd) return requirements;
      if (after.kind != TokenKind::kComma) fail(after, "',' or end of string");
      term_start_.reset();
      if (!starts_requirement(peek())) fail(peek(), "a key or '!' after ','");
    }
  }

 private:
  static bool starts_requirement(const Token& token) {
    return is_word(token) || token.kind == TokenKind::kNot;
  }

  const Token& peek() const { return tokens_[position_]; }
  const Token& next() {
    const Token& token = tokens_[position_];
    if (token.kind != TokenKind::kEnd) ++position_;
    return token;
  }

  // The selector, the requirement being read up to and with `at`, and the fault.
  [[noreturn]] void fail(const Token& at, const std::string& expected) const {
    fail_with("found " + describe(at) + ", expected " + expected, at);
  }
  [[noreturn]] void fail_with(const std::string& fault, const Token& at) const {
    std::string message = "invalid label selector \"" + std::string(text_) + "\": ";
    if (term_start_) {
      const std::size_t end =
          at.kind == TokenKind::kEnd ? text_.size() : at.offset + at.text.size();
      message += "term \"" + std::string(text_.substr(*term_start_, end - *term_start_)) + "\": ";
    }
    throw std::invalid_argument(message + fault);
  }

  LabelRequirement requirement() {
    LabelRequirement r;
    const bool negated = peek().kind == TokenKind::kNot;
    if (negated) next();
    const Token& key = next();
    if (!is_word(key)) fail(key, "a key");
    r.key = std::string(key.text);
    if (auto fault = key_fault(r.key)) fail_with(*fault, key);
    if (negated) {
      r.op = SelectorOperator::kDoesNotExist;
      return r;
    }
    if (peek().kind == TokenKind::kEnd || peek().kind == TokenKind::kComma) {
      r.op = SelectorOperator::kExists;
      return r;
    }
    const Token& op = next();
    switch (op.kind) {
      case TokenKind::kIn:
      case TokenKind::kNotIn:
        r.op = op.kind == TokenKind::kIn ? SelectorOperator::kIn : SelectorOperator::kNotIn;
        r.values = value_set();
        break;
      case TokenKind::kEquals:
      case TokenKind::kDoubleEquals:
        r.op = SelectorOperator::kEquals;
        r.values = {exact_value()};
        break;
      case TokenKind::kNotEquals:
        r.op = SelectorOperator::kNotEquals;
        r.values = {exact_value()};
        break;
      case TokenKind::kGreater:
      case TokenKind::kLess:
        r.op = op.kind == TokenKind::kGreater ? SelectorOperator::kGreaterThan
                                              : SelectorOperator::kLessThan;
        r.values = {exact_value()};
        break;
      default:
        fail(op, "an operator: in, notin, =, ==, !=, > or <");
    }
    sort_unique(r.values);
    if (auto fault = values_fault(r)) fail_with(*fault, tokens_[position_ - 1]);
    return r;
  }

  // After `=`, `!=`, `>` or `<`: one value, empty where the requirement ends.
  std::string exact_value() {
    if (peek().kind == TokenKind::kEnd || peek().kind == TokenKind::kComma) return "";
    const Token& value = next();
    if (!is_word(value)) fail(value, "a value");
    return std::string(value.text);
  }

  // `(a,b)`. Values may be empty: `()` and `(,)` hold "", `(a,,b)` and `(a,)` add "" to a and
  // b. As in kube-apiserver, an empty value between two commas must be followed by a value or
  // another comma: `(a,,)` is refused.
  std::vector<std::string> value_set() {
    const Token& open = next();
    if (open.kind != TokenKind::kOpen) fail(open, "'('");
    std::vector<std::string> values;
    if (peek().kind == TokenKind::kClose) {
      next();
      return {""};
    }
    if (!is_word(peek()) && peek().kind != TokenKind::kComma) {
      fail(peek(), "',', ')' or a value");
    }
    while (true) {
      const Token& token = next();
      if (is_word(token)) {
        values.emplace_back(token.text);
        if (peek().kind == TokenKind::kClose) break;
        if (peek().kind != TokenKind::kComma) fail(peek(), "',' or ')'");
      } else if (token.kind == TokenKind::kComma) {
        if (values.empty()) values.emplace_back();  // `(,`
        if (peek().kind == TokenKind::kClose) {
          values.emplace_back();  // `,)`
          break;
        }
        if (peek().kind == TokenKind::kComma) {
          next();
          values.emplace_back();  // `,,`
        }
      } else {
        fail(token, "',' or a value");
      }
    }
    next();  // ')'
    return values;
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  std::size_t position_ = 0;
  std::optional<std::size_t> term_start_;  // where the requirement being read begins
};

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string result;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) result += separator;
    result += parts[i];
  }
  return result;
}

}  // namespace

LabelSelector::LabelSelector(std::vector<LabelRequirement> requirements)
    : requirements_(std::move(requirements)) {
  for (LabelRequirement& r : requirements_) {
    sort_unique(r.values);
    std::optional<std::string> fault = key_fault(r.key);
    if (!fault) fault = values_fault(r);
    if (fault) throw std::invalid_argument("invalid label selector requirement: " + *fault);
  }
  std::stable_sort(
      requirements_.begin(), requirements_.end(),
      [](const LabelRequirement& a, const LabelRequirement& b) { return a.key < b.key; });
}

LabelSelector LabelSelector::parse(std::string_view text) {
  return LabelSelector(Parser(text).parse());
}

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
  return std::all_of(requirements_.begin(), requirements_.end(), [&](const LabelRequirement& r) {
    const auto it = labels.find(r.key);
    const bool present = it != labels.end();
    const auto in_values = [&] {
      return present && std::binary_search(r.values.begin(), r.values.end(), it->second);
    };
    switch (r.op) {
      case SelectorOperator::kEquals:
      case SelectorOperator::kIn:
        return in_values();
      case SelectorOperator::kNotEquals:
      case SelectorOperator::kNotIn:
        return !in_values();  // an absent label satisfies != and notin
      case SelectorOperator::kExists:
        return present;
      case SelectorOperator::kDoesNotExist:
        return !present;
      case SelectorOperator::kGreaterThan:
      case SelectorOperator::kLessThan: {
        // An absent label, or one that is not an integer, satisfies neither.
        const auto label = present ? parse_int64(it->second) : std::nullopt;
        const std::int64_t bound = *parse_int64(r.values.front());
        if (!label) return false;
        return r.op == SelectorOperator::kGreaterThan ? *label > bound : *label < bound;
      }
    }
    return false;
  });
}

bool LabelSelector::matches(const nlohmann::json& obj) const { return matches(object_labels(obj)); }

std::string LabelSelector::to_string() const {
  std::vector<std::string> terms;
  for (const LabelRequirement& r : requirements_) {
    switch (r.op) {
      case SelectorOperator::kEquals:
      case SelectorOperator::kNotEquals:
      case SelectorOperator::kGreaterThan:
      case SelectorOperator::kLessThan:
        terms.push_back(r.key + operator_text(r.op) + r.values.front());
        break;
      case SelectorOperator::kIn:
      case SelectorOperator::kNotIn:
        terms.push_back(r.key + " " + operator_text(r.op) + " (" + join(r.values, ",") + ")");
        break;
      case SelectorOperator::kExists:
        terms.push_back(r.key);
        break;
      case SelectorOperator::kDoesNotExist:
        terms.push_back("!" + r.key);
        break;
    }
  }
  return join(terms, ",");
}

}  // namespace tessel::kube
