#include "api/yaml_json.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <regex>
#include <sstream>

#include "api/manifest_error.h"

namespace tessel::api {
namespace {

using nlohmann::json;

// Deeper nesting than any manifest has; a bound so that hostile input cannot exhaust the stack.
constexpr int kMaxDepth = 64;
// Values in one document, aliases counted each time they are used: a bound on what nested
// aliases ("billion laughs") can expand to. A TrainingJob has a few hundred.
constexpr long kMaxValues = 100000;

std::string where(const YAML::Mark& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

[[noreturn]] void fail(const std::string& source, const YAML::Mark& mark, const std::string& why) {
  throw ManifestError(source, {{"", where(mark) + ": " + why}});
}

std::optional<size_t> first_invalid_utf8(const std::string& text);

// A scalar's or a key's text as yaml-cpp decoded it. UTF-8 text in can still come out as a string
// that is not (yaml-cpp turns control characters such as NUL into bytes like a lone 0x85: found
// by tests/fuzz), and nlohmann::json cannot write one: such a value is refused.
const std::string& utf8_text(const YAML::Node& node, const std::string& source) {
  const std::string& text = node.Scalar();
  if (first_invalid_utf8(text)) {
    fail(source, node.Mark(), "a value that is not UTF-8 once read (a control character?)");
  }
  return text;
}

json scalar(const YAML::Node& node, const std::string& source) {
  const std::string& text = utf8_text(node, source);
  if (node.Tag() == "!") return text;  // quoted
  static const std::regex integer("[-+]?[0-9]+");
  static const std::regex decimal("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  static const std::regex infinite("[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
    return nullptr;
  if (std::regex_match(text, integer)) {
    int64_t value = 0;
    const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
    const auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size()) return value;
    // Beyond int64: a (rounded) number, as kube-apiserver's JSON decoding makes of it.
  }
  if (std::regex_match(text, decimal)) {
    const double value = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(value)) fail(source, node.Mark(), "'" + text + "' is beyond any number");
    return value;
  }
  if (std::regex_match(text, infinite)) {
    fail(source, node.Mark(), "'" + text + "' is not a finite number");
  }
  return text;
}

json convert(const YAML::Node& node, const std::string& source, int depth, long& values) {
  if (depth > kMaxDepth)
    fail(source, node.Mark(), "nested deeper than " + std::to_string(kMaxDepth));
  if (++values > kMaxValues) {
    fail(source, node.Mark(),
         "more than " + std::to_string(kMaxValues) + " values (aliases expanded)");
  }
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar(node, source);
    case YAML::NodeType::Sequence: {
      json array = json::array();
      for (const YAML::Node& item : node) array.push_back(convert(item, source, depth + 1, values));
      return array;
    }
    case YAML::NodeType::Map: {
      json object = json::object();
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) fail(source, entry.first.Mark(), "a key must be a string");
        const std::string key = utf8_text(entry.first, source);
        if (object.contains(key)) fail(source, entry.first.Mark(), "duplicate key '" + key + "'");
        object[key] = convert(entry.second, source, depth + 1, values);
      }
      return object;
    }
  }
  return nullptr;
}

// The documents of a YAML stream. Not YAML::LoadAll: yaml-cpp 0.7's parser never consumes a ','
// outside a flow collection (",", "a: 1\n---\n,"), and yields an empty document at it again and
// again, so LoadAll never returns. A document that starts where the one before it did is that.
size_t count_documents(const std::string& text, const std::string& source) {
  struct DocumentStarts : YAML::EventHandler {
    std::optional<YAML::Mark> start;
    void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  };
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  size_t documents = 0;
  std::optional<YAML::Mark> previous;
  DocumentStarts handler;
  while (parser.HandleNextDocument(handler)) {
    if (previous && handler.start && handler.start->pos == previous->pos) {
      const size_t at = static_cast<size_t>(handler.start->pos);
      const std::string token = at < text.size() ? "'" + text.substr(at, 1) + "'" : "token";
      fail(source, *handler.start, "unexpected " + token + " (no YAML node starts with it)");
    }
    previous = handler.start;
    ++documents;
  }
  return documents;
}

// The offset of the first byte that is not part of a well-formed UTF-8 character (overlong forms,
// surrogates and code points past U+10FFFF are not), or nullopt.
std::optional<size_t> first_invalid_utf8(const std::string& text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = byte(i);
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
    if (lead < 0x80) {
      length = 1;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // not overlong
      if (lead == 0xED) high = 0x9F;  // not a surrogate
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;   // not overlong
      if (lead == 0xF4) high = 0x8F;  // at most U+10FFFF
    } else {
      return i;
    }
    if (length > text.size() - i) return i;
    for (size_t k = 1; k < length; ++k) {
      const unsigned char c = byte(i + k);
      if (k == 1 ? (c < low || c > high) : (c < 0x80 || c > 0xBF)) return i;
    }
    i += length;
  }
  return std::nullopt;
}

// Where byte `offset` of `text` is, as yaml-cpp's marks say it (0-based line and column).
YAML::Mark mark_at(const std::string& text, size_t offset) {
  YAML::Mark mark;
  mark.pos = static_cast<int>(offset);
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++mark.line;
      mark.column = 0;
    } else {
      ++mark.column;
    }
  }
  return mark;
}

std::string hex_byte(char c) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto b = static_cast<unsigned char>(c);
  return std::string("0x") + kDigits[b >> 4] + kDigits[b & 15];
}

}  // namespace

json yaml_to_json(const std::string& text, const std::string& source) {
  if (const std::optional<size_t> bad = first_invalid_utf8(text)) {
    throw ManifestError(source,
                        {{"", where(mark_at(text, *bad)) + ": byte " + hex_byte(text[*bad]) +
                                  " is not UTF-8 (YAML and JSON text is UTF-8)"}});
  }
  YAML::Node document;
  try {
    const size_t documents = count_documents(text, source);
    if (documents != 1) {
      throw ManifestError(source,
                          {{"", "expected one YAML document, found " + std::to_string(documents)}});
    }
    document = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(source, e.mark, e.msg);
  }
  long values = 0;
  return convert(document, source, 0, values);
}

}  // namespace tessel::api
