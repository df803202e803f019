#include "kube/field_selector.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace tessel::kube {
namespace {

using nlohmann::json;

// Splits at commas not escaped by a backslash; the pieces keep their escapes.
std::vector<std::string_view> split_terms(std::string_view text) {
  std::vector<std::string_view> terms;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;  // the escaped character, whatever it is, is data
    } else if (text[i] == ',') {
      terms.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  terms.push_back(text.substr(start));
  return terms;
}

struct SplitTerm {
  std::string_view field;
  bool equals = true;
  std::string_view raw_value;  // still escaped
};

// Splits at the first place where `!=`, `==` or `=` begins (tried in that order there).
std::optional<SplitTerm> split_term(std::string_view term) {
  for (std::size_t i = 0; i < term.size(); ++i) {
    const std::string_view rest = term.substr(i);
    if (rest.starts_with("!=")) return SplitTerm{term.substr(0, i), false, rest.substr(2)};
    if (rest.starts_with("==")) return SplitTerm{term.substr(0, i), true, rest.substr(2)};
    if (rest.starts_with("=")) return SplitTerm{term.substr(0, i), true, rest.substr(1)};
  }
  return std::nullopt;
}

// The bytes of the UTF-8 character that starts text (one byte where text is not UTF-8).
std::string_view first_character(std::string_view text) {
  std::size_t length = 1;
  while (length < text.size() && length < 4 &&
         (static_cast<unsigned char>(text[length]) & 0xC0) == 0x80) {
    ++length;
  }
  return text.substr(0, length);
}

// `\\` `\,` `\=` to `\` `,` `=`; throws std::invalid_argument(fault) for anything else.
std::string unescape_value(std::string_view raw) {
  std::string value;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '=' || c == ',') {
      throw std::invalid_argument(std::string("unescaped '") + c + "' in the value (write '\\" + c +
                                  "' for a literal '" + c + "')");
    }
    if (c != '\\') {
      value += c;
      continue;
    }
    if (i + 1 == raw.size()) {
      throw std::invalid_argument("the value ends in an unfinished escape '\\'");
    }
    const char escaped = raw[++i];
    if (escaped != '\\' && escaped != ',' && escaped != '=') {
      throw std::invalid_argument("invalid escape sequence '\\" +
                                  std::string(first_character(raw.substr(i))) +
                                  "' in the value (the escapes are '\\\\', '\\,' and '\\=')");
    }
    value += escaped;
  }
  return value;
}

std::string escape_value(std::string_view value) {
  std::string escaped;
  for (const char c : value) {
    if (c == '\\' || c == ',' || c == '=') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

std::string term_text(const FieldRequirement& r) {
  return r.field + (r.equals ? "=" : "!=") + escape_value(r.value);
}

// The value at a dotted path as the server compares it: strings as-is, other scalars in
// their JSON form, anything missing as "".
std::string field_value(const json& obj, std::string_view path) {
  const json* node = &obj;
  while (true) {
    const auto dot = path.find('.');
    if (!node->is_object()) return {};
    const auto it = node->find(path.substr(0, dot));
    if (it == node->end()) return {};
    node = &*it;
    if (dot == std::string_view::npos) break;
    path = path.substr(dot + 1);
  }
  if (node->is_string()) return node->get<std::string>();
  if (node->is_null() || node->is_structured()) return {};
  return node->dump();
}

}  // namespace

FieldSelector::FieldSelector(std::vector<FieldRequirement> requirements)
    : requirements_(std::move(requirements)) {
  for (const FieldRequirement& r : requirements_) {
    const std::string term = term_text(r);
    const auto split = split_term(term);
    if (split_terms(term).size() != 1 || !split || split->field != r.field ||
        split->equals != r.equals) {
      throw std::invalid_argument("field selector field \"" + r.field +
                                  "\" cannot be written in a selector: it would not read back "
                                  "as itself from \"" +
                                  term + "\"");
    }
  }
}

FieldSelector FieldSelector::parse(std::string_view text) {
  std::vector<std::string_view> terms;
  if (!text.empty()) terms = split_terms(text);
  std::sort(terms.begin(), terms.end());  // the server's order: by the terms' bytes
  std::vector<FieldRequirement> requirements;
  for (const std::string_view term : terms) {
    if (term.empty()) continue;
    const auto fail = [&](const std::string& fault) {
      throw std::invalid_argument("invalid field selector \"" + std::string(text) + "\": term \"" +
                                  std::string(term) + "\": " + fault);
    };
    const auto split = split_term(term);
    if (!split) fail("no operator (=, == or !=)");
    FieldRequirement r;
    r.field = std::string(split->field);
    r.equals = split->equals;
    try {
      r.value = unescape_value(split->raw_value);
    } catch (const std::invalid_argument& error) {
      fail(error.what());
    }
    requirements.push_back(std::move(r));
  }
  return FieldSelector(std::move(requirements));
}

bool FieldSelector::matches(const json& obj) const {
  return std::all_of(requirements_.begin(), requirements_.end(), [&](const FieldRequirement& r) {
    return (field_value(obj, r.field) == r.value) == r.equals;
  });
}

std::string FieldSelector::to_string() const {
  std::string text;
  for (const FieldRequirement& r : requirements_) {
    if (!text.empty()) text += ',';
    text += term_text(r);
  }
  return text;
}

}  // namespace tessel::kube
