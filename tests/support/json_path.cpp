#include "tests/support/json_path.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <stdexcept>
#include <utility>

#include "tests/support/structural_schema_errors.h"

namespace tessel::testing {

using nlohmann::json;

struct JsonPathStep;

// One side of a filter's comparison: a path relative to the element (@...) or a literal.
struct FilterOperand {
  bool is_path = false;
  std::vector<JsonPathStep> path;
  json literal;
};

struct IndexRange {
  std::optional<long> start;  // an index when !is_slice
  std::optional<long> end;
  long step = 1;
  bool is_slice = false;
};

struct JsonPathStep {
  enum class Kind { kFields, kWildcard, kRecursive, kIndexes, kFilter };
  Kind kind = Kind::kFields;
  std::vector<std::string> names;  // kFields; kRecursive: one name, or none for ..*
  std::vector<IndexRange> indexes;
  // kFilter: left [op right]; op empty for an existence test.
  FilterOperand left;
  std::string op;
  FilterOperand right;
};

namespace {

class Parser {
 public:
  Parser(const std::string& expression, std::string text)
      : expression_(expression), text_(std::move(text)) {}

  std::vector<JsonPathStep> steps() {
    std::vector<JsonPathStep> steps;
    if (pos_ < text_.size() && text_[pos_] == '$') ++pos_;
    while (pos_ < text_.size()) {
      if (text_[pos_] == '.') {
        ++pos_;
        if (pos_ < text_.size() && text_[pos_] == '.') {
          ++pos_;
          steps.push_back(recursive_step());
        } else if (pos_ < text_.size() && text_[pos_] != '[') {
          steps.push_back(dot_step());
        }
      } else if (text_[pos_] == '[') {
        steps.push_back(bracket_step());
      } else {
        fail("unexpected '" + std::string(1, text_[pos_]) + "'");
      }
    }
    return steps;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("invalid JSONPath " + go_quote(expression_) + ": " + what +
                                " at offset " + std::to_string(pos_));
  }

  // A field name after '.', up to the next '.' or '['; "\." escapes a dot.
  std::string name() {
    std::string name;
    while (pos_ < text_.size() && text_[pos_] != '.' && text_[pos_] != '[') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      name += text_[pos_++];
    }
    if (name.empty()) fail("missing field name");
    return name;
  }

  JsonPathStep dot_step() {
    JsonPathStep step;
    if (text_[pos_] == '*') {
      ++pos_;
      step.kind = JsonPathStep::Kind::kWildcard;
    } else {
      step.names.push_back(name());
    }
    return step;
  }

  JsonPathStep recursive_step() {
    JsonPathStep step;
    step.kind = JsonPathStep::Kind::kRecursive;
    if (pos_ < text_.size() && text_[pos_] == '*') {
      ++pos_;
    } else {
      step.names.push_back(name());
    }
    return step;
  }

  // The text between '[' and its ']', quotes and parentheses respected.
  std::string bracket_content() {
    const std::size_t start = ++pos_;
    int depth = 0;
    char quote = 0;
    for (; pos_ < text_.size(); ++pos_) {
      const char c = text_[pos_];
      if (quote != 0) {
        if (c == '\\')
          ++pos_;
        else if (c == quote)
          quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '(') {
        ++depth;
      } else if (c == ')') {
        --depth;
      } else if (c == ']' && depth == 0) {
        return text_.substr(start, pos_++ - start);
      }
    }
    pos_ = start - 1;
    fail("unterminated '['");
  }

  JsonPathStep bracket_step() {
    const std::string content = trim(bracket_content());
    JsonPathStep step;
    if (content == "*") {
      step.kind = JsonPathStep::Kind::kWildcard;
    } else if (content.size() >= 3 && content[0] == '?' && content[1] == '(' &&
               content.back() == ')') {
      step.kind = JsonPathStep::Kind::kFilter;
      filter(content.substr(2, content.size() - 3), step);
    } else if (!content.empty() && (content[0] == '\'' || content[0] == '"')) {
      for (const auto& part : split_top_level(content, ',')) step.names.push_back(quoted(part));
    } else {
      step.kind = JsonPathStep::Kind::kIndexes;
      for (const auto& part : split_top_level(content, ',')) step.indexes.push_back(range(part));
    }
    return step;
  }

  static std::string trim(const std::string& text) {
    const auto first = text.find_first_not_of(" \t");
    if (first == std::string::npos) return "";
    return text.substr(first, text.find_last_not_of(" \t") - first + 1);
  }

  static std::vector<std::string> split_top_level(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::string current;
    char quote = 0;
    for (const char c : text) {
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == separator) {
        parts.push_back(trim(current));
        current.clear();
        continue;
      }
      current += c;
    }
    parts.push_back(trim(current));
    return parts;
  }

  std::string quoted(const std::string& text) const {
    if (text.size() < 2 || (text[0] != '\'' && text[0] != '"') || text.back() != text[0]) {
      fail("bad quoted name " + text);
    }
    std::string unquoted;
    for (std::size_t i = 1; i + 1 < text.size(); ++i) {
      if (text[i] == '\\' && i + 2 < text.size()) ++i;
      unquoted += text[i];
    }
    return unquoted;
  }

  std::optional<long> integer(const std::string& text) const {
    const std::string value = trim(text);
    if (value.empty()) return std::nullopt;
    std::size_t used = 0;
    long number = 0;
    try {
      number = std::stol(value, &used);
    } catch (const std::exception&) {
      fail("bad index " + go_quote(value));
    }
    if (used != value.size()) fail("bad index " + go_quote(value));
    return number;
  }

  IndexRange range(const std::string& text) const {
    IndexRange range;
    const auto parts = split_top_level(text, ':');
    if (parts.size() > 3) fail("bad slice " + go_quote(text));
    range.start = integer(parts[0]);
    if (parts.size() == 1) {
      if (!range.start) fail("empty index");
      return range;
    }
    range.is_slice = true;
    range.end = integer(parts[1]);
    if (parts.size() == 3 && !parts[2].empty()) {
      range.step = *integer(parts[2]);
      if (range.step <= 0) fail("slice step must be positive");
    }
    return range;
  }

  void filter(const std::string& condition, JsonPathStep& step) const {
    static const char* operators[] = {"==", "!=", "<=", ">=", "<", ">"};
    char quote = 0;
    for (std::size_t i = 0; i < condition.size(); ++i) {
      const char c = condition[i];
      if (quote != 0) {
        if (c == quote) quote = 0;
        continue;
      }
      if (c == '\'' || c == '"') {
        quote = c;
        continue;
      }
      for (const char* op : operators) {
        if (condition.compare(i, std::string(op).size(), op) == 0) {
          step.left = operand(condition.substr(0, i));
          step.op = op;
          step.right = operand(condition.substr(i + step.op.size()));
          return;
        }
      }
    }
    step.left = operand(condition);
    if (!step.left.is_path) fail("a filter without comparison must test a path");
  }

  FilterOperand operand(const std::string& text) const {
    const std::string value = trim(text);
    FilterOperand operand;
    if (!value.empty() && value[0] == '@') {
      operand.is_path = true;
      operand.path = Parser(expression_, value.substr(1)).steps();
    } else if (!value.empty() && (value[0] == '\'' || value[0] == '"')) {
      operand.literal = quoted(value);
    } else if (value == "true" || value == "false") {
      operand.literal = value == "true";
    } else {
      try {
        operand.literal = json::parse(value);
      } catch (const json::exception&) {
        fail("bad filter operand " + go_quote(value));
      }
      if (!operand.literal.is_number()) fail("bad filter operand " + go_quote(value));
    }
    return operand;
  }

  const std::string& expression_;
  std::string text_;
  std::size_t pos_ = 0;
};

void evaluate_steps(const std::vector<JsonPathStep>& steps, std::size_t i, const json& value,
                    std::vector<json>& out);

// The value itself and everything below it, in document order.
void descendants(const json& value, std::vector<const json*>& out) {
  out.push_back(&value);
  if (value.is_structured()) {
    for (const auto& child : value) descendants(child, out);
  }
}

std::optional<json> first_result(const std::vector<JsonPathStep>& path, const json& value) {
  std::vector<json> results;
  evaluate_steps(path, 0, value, results);
  if (results.empty()) return std::nullopt;
  return results.front();
}

bool compare(const json& left, const std::string& op, const json& right) {
  if (op == "==")
    return left.is_number() && right.is_number() ? left.get<double>() == right.get<double>()
                                                 : left == right;
  if (op == "!=") return !compare(left, "==", right);
  int order;
  if (left.is_number() && right.is_number()) {
    const double a = left.get<double>();
    const double b = right.get<double>();
    order = a < b ? -1 : (a > b ? 1 : 0);
  } else if (left.is_string() && right.is_string()) {
    order = left.get<std::string>().compare(right.get<std::string>());
  } else {
    return false;  // incomparable types fail the filter
  }
  if (op == "<") return order < 0;
  if (op == ">") return order > 0;
  if (op == "<=") return order <= 0;
  return order >= 0;
}

bool passes(const JsonPathStep& step, const json& element) {
  auto resolve = [&](const FilterOperand& operand) -> std::optional<json> {
    if (!operand.is_path) return operand.literal;
    return first_result(operand.path, element);
  };
  const auto left = resolve(step.left);
  if (step.op.empty()) return left.has_value();
  const auto right = resolve(step.right);
  return left && right && compare(*left, step.op, *right);
}

void evaluate_indexes(const std::vector<JsonPathStep>& steps, std::size_t i, const json& array,
                      std::vector<json>& out) {
  const auto size = static_cast<long>(array.size());
  auto normalize = [size](long index) { return index < 0 ? index + size : index; };
  for (const auto& range : steps[i].indexes) {
    if (!range.is_slice) {
      const long index = normalize(*range.start);
      if (index >= 0 && index < size) evaluate_steps(steps, i + 1, array[index], out);
      continue;
    }
    const long start = std::clamp(range.start ? normalize(*range.start) : 0L, 0L, size);
    const long end = std::clamp(range.end ? normalize(*range.end) : size, 0L, size);
    for (long index = start; index < end; index += range.step) {
      evaluate_steps(steps, i + 1, array[index], out);
    }
  }
}

void evaluate_steps(const std::vector<JsonPathStep>& steps, std::size_t i, const json& value,
                    std::vector<json>& out) {
  if (i == steps.size()) {
    out.push_back(value);
    return;
  }
  const JsonPathStep& step = steps[i];
  switch (step.kind) {
    case JsonPathStep::Kind::kFields:
      if (value.is_object()) {
        for (const auto& name : step.names) {
          const auto field = value.find(name);
          if (field != value.end()) evaluate_steps(steps, i + 1, *field, out);
        }
      }
      break;
    case JsonPathStep::Kind::kWildcard:
      if (value.is_structured()) {
        for (const auto& child : value) evaluate_steps(steps, i + 1, child, out);
      }
      break;
    case JsonPathStep::Kind::kRecursive: {
      std::vector<const json*> nodes;
      descendants(value, nodes);
      for (const json* node : nodes) {
        if (step.names.empty()) {
          evaluate_steps(steps, i + 1, *node, out);
        } else if (node->is_object()) {
          const auto field = node->find(step.names.front());
          if (field != node->end()) evaluate_steps(steps, i + 1, *field, out);
        }
      }
      break;
    }
    case JsonPathStep::Kind::kIndexes:
      if (value.is_array()) evaluate_indexes(steps, i, value, out);
      break;
    case JsonPathStep::Kind::kFilter:
      if (value.is_structured()) {
        for (const auto& element : value) {
          if (passes(step, element)) evaluate_steps(steps, i + 1, element, out);
        }
      }
      break;
  }
}

}  // namespace

JsonPath::JsonPath(std::string expression, std::shared_ptr<const std::vector<JsonPathStep>> steps)
    : expression_(std::move(expression)), steps_(std::move(steps)) {}

JsonPath JsonPath::parse(const std::string& expression) {
  std::string text = expression;
  if (text.size() >= 2 && text.front() == '{' && text.back() == '}') {
    text = text.substr(1, text.size() - 2);
  }
  if (text.empty()) {
    throw std::invalid_argument("invalid JSONPath " + go_quote(expression) + ": it is empty");
  }
  auto steps = std::make_shared<const std::vector<JsonPathStep>>(Parser(expression, text).steps());
  return JsonPath(expression, std::move(steps));
}

std::vector<json> JsonPath::evaluate(const json& document) const {
  std::vector<json> results;
  evaluate_steps(*steps_, 0, document, results);
  return results;
}

std::string json_path_text(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "<nil>";
    case json::value_t::string:
      return value.get<std::string>();
    case json::value_t::object: {
      std::string text = "map[";
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        text += (first ? "" : " ") + key + ":" + json_path_text(item);
        first = false;
      }
      return text + "]";
    }
    case json::value_t::array: {
      std::string text = "[";
      for (std::size_t i = 0; i < value.size(); ++i) {
        text += (i > 0 ? " " : "") + json_path_text(value[i]);
      }
      return text + "]";
    }
    default:
      return go_value_text(value);  // numbers and booleans print alike in both
  }
}

}  // namespace tessel::testing
