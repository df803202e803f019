#include "tests/support/api_field_selector.h"

#include <algorithm>
#include <stdexcept>

namespace tessel::testing {
namespace {

using json = nlohmann::json;

// Splits at the commas that no backslash escapes, keeping the escapes in the terms.
std::vector<std::string> split_terms(std::string_view text) {
  std::vector<std::string> terms;
  std::size_t start = 0;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (escaped) {
      escaped = false;
    } else if (text[i] == '\\') {
      escaped = true;
    } else if (text[i] == ',') {
      terms.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  terms.emplace_back(text.substr(start));
  return terms;
}

// The UTF-8 sequence of the code point starting at text[i].
std::string code_point_at(const std::string& text, std::size_t i) {
  std::size_t end = i + 1;
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  return text.substr(i, end - i);
}

std::string unescape(const std::string& value) {
  std::string out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (c == '\\') {
      if (i + 1 == value.size()) {
        throw std::invalid_argument("invalid field selector: invalid escape sequence: \\");
      }
      const char next = value[i + 1];
      if (next != '\\' && next != ',' && next != '=') {
        throw std::invalid_argument("invalid field selector: invalid escape sequence: \\" +
                                    code_point_at(value, i + 1));
      }
      out += next;
      ++i;
    } else if (c == ',' || c == '=') {
      // Go prints the rune as its number.
      throw std::invalid_argument("invalid field selector: unescaped character in value: " +
                                  std::to_string(static_cast<int>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

// The value at a dotted path: strings as they are, other scalars in their JSON form.
std::string field_value(const json& object, std::string_view path) {
  const json* node = &object;
  while (true) {
    if (!node->is_object()) return "";
    const std::size_t dot = path.find('.');
    const auto found = node->find(std::string(path.substr(0, dot)));
    if (found == node->end()) return "";
    node = &*found;
    if (dot == std::string_view::npos) break;
    path = path.substr(dot + 1);
  }
  if (node->is_string()) return node->get<std::string>();
  if (node->is_null() || node->is_structured()) return "";
  return node->dump();
}

}  // namespace

FieldSelector FieldSelector::parse(std::string_view text) {
  FieldSelector selector;
  if (text.empty()) return selector;
  std::vector<std::string> terms = split_terms(text);
  std::sort(terms.begin(), terms.end());
  for (const std::string& term : terms) {
    if (term.empty()) continue;
    // The first operator from the left splits the term; at one position "!=" and "==" are
    // tried before "=". The field is never unescaped.
    std::size_t at = 0;
    std::size_t length = 0;
    for (; at < term.size(); ++at) {
      if (term.compare(at, 2, "!=") == 0 || term.compare(at, 2, "==") == 0) {
        length = 2;
        break;
      }
      if (term[at] == '=') {
        length = 1;
        break;
      }
    }
    if (length == 0) {
      throw std::invalid_argument("invalid selector: '" + std::string(text) +
                                  "'; can't understand '" + term + "'");
    }
    selector.requirements_.push_back(
        {term.substr(0, at), term[at] != '!', unescape(term.substr(at + length))});
  }
  return selector;
}

bool FieldSelector::matches(const json& object) const {
  return std::all_of(requirements_.begin(), requirements_.end(), [&](const FieldRequirement& r) {
    return (field_value(object, r.field) == r.value) == r.equals;
  });
}

std::optional<std::string> FieldSelector::required_value(std::string_view field) const {
  for (const FieldRequirement& r : requirements_) {
    if (r.equals && r.field == field) return r.value;
  }
  return std::nullopt;
}

}  // namespace tessel::testing
