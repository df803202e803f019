#include "tests/support/http_message.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <utility>

namespace tessel::testing {

std::optional<std::string> HttpHeaders::get(std::string_view name) const {
  for (const auto& [key, value] : entries) {
    if (http::equals_ignore_case(key, name)) return value;
  }
  return std::nullopt;
}

void HttpHeaders::set(std::string name, std::string value) {
  std::erase_if(entries,
                [&](const auto& entry) { return http::equals_ignore_case(entry.first, name); });
  entries.emplace_back(std::move(name), std::move(value));
}

std::optional<std::string> HttpServerRequest::query_param(std::string_view name) const {
  for (const auto& [key, value] : query) {
    if (key == name) return value;
  }
  return std::nullopt;
}

namespace http {
namespace {

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 9110 token characters, for methods and header names.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

}  // namespace

bool equals_ignore_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool has_token(std::string_view header_value, std::string_view token) {
  while (!header_value.empty()) {
    const auto comma = header_value.find(',');
    if (equals_ignore_case(trim(header_value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    header_value.remove_prefix(comma + 1);
  }
  return false;
}

std::string percent_decode(std::string_view text, bool plus_is_space, std::string_view what) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      const int high = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
      const int low = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
      if (high < 0 || low < 0) {
        throw RequestError(400, "malformed percent-escape in " + std::string(what) + ": \"" +
                                    std::string(text.substr(i, 3)) + "\"");
      }
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

void parse_request_line(std::string_view line, RequestHead& head) {
  const auto first_space = line.find(' ');
  const auto last_space = line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == last_space) {
    throw RequestError(400, "malformed request line");
  }
  const auto method = line.substr(0, first_space);
  const auto target = line.substr(first_space + 1, last_space - first_space - 1);
  const auto version = line.substr(last_space + 1);
  if (!is_token(method)) throw RequestError(400, "malformed request line: bad method");
  if (target.empty() || target.find(' ') != std::string_view::npos) {
    throw RequestError(400, "malformed request line: bad request target");
  }
  if (version == "HTTP/1.1") {
    head.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    head.minor_version = 0;
  } else if (version.starts_with("HTTP/")) {
    throw RequestError(505, "unsupported HTTP version " + std::string(version));
  } else {
    throw RequestError(400, "malformed request line: bad HTTP version");
  }
  head.request.method = method;
  head.request.target = target;
  decode_target(head.request);
}

void parse_header_line(std::string_view line, RequestHead& head) {
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) throw RequestError(400, "malformed header line");
  const auto name = line.substr(0, colon);
  if (!is_token(name)) {
    throw RequestError(400, "malformed header name \"" + std::string(name) + "\"");
  }
  head.request.headers.entries.emplace_back(std::string(name),
                                            std::string(trim(line.substr(colon + 1))));
}

void decode_target(HttpServerRequest& request) {
  std::string origin_form = request.target;
  // The absolute form, which clients send to proxies: "http://host:port/path?query".
  for (const std::string_view scheme : {"http://", "https://"}) {
    if (!origin_form.starts_with(scheme)) continue;
    const auto path_start = origin_form.find_first_of("/?", scheme.size());
    origin_form = path_start == std::string::npos ? "" : origin_form.substr(path_start);
    if (!origin_form.starts_with('/')) origin_form.insert(0, "/");
    break;
  }
  const std::string_view target = origin_form;
  if (!target.starts_with('/')) {
    throw RequestError(400, "request target \"" + request.target +
                                "\" is neither an absolute path nor an absolute URL");
  }
  const auto question = target.find('?');
  request.path = percent_decode(target.substr(0, question), false, "the request path");
  request.query.clear();
  if (question == std::string_view::npos) return;
  std::string_view rest = target.substr(question + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const auto pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const auto equals = pair.find('=');
    const auto key = pair.substr(0, equals);
    const auto value =
        equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1);
    request.query.emplace_back(percent_decode(key, true, "the query"),
                               percent_decode(value, true, "the query"));
  }
}

std::size_t parse_chunk_size(std::string_view line) {
  const auto size_text = trim(line.substr(0, line.find(';')));
  if (size_text.empty()) throw RequestError(400, "malformed chunk size: empty");
  std::size_t size = 0;
  for (const char c : size_text) {
    const int digit = hex_value(c);
    if (digit < 0) {
      throw RequestError(400, "malformed chunk size \"" + std::string(size_text) + "\"");
    }
    if (size > (std::numeric_limits<std::size_t>::max() >> 4)) {
      throw RequestError(400, "chunk size \"" + std::string(size_text) + "\" overflows");
    }
    size = size * 16 + static_cast<std::size_t>(digit);
  }
  return size;
}

const char* reason_phrase(int status) {
  static constexpr std::pair<int, const char*> kPhrases[] = {
      {100, "Continue"},
      {101, "Switching Protocols"},
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {204, "No Content"},
      {206, "Partial Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {304, "Not Modified"},
      {307, "Temporary Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {406, "Not Acceptable"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {410, "Gone"},
      {411, "Length Required"},
      {412, "Precondition Failed"},
      {413, "Request Entity Too Large"},
      {415, "Unsupported Media Type"},
      {417, "Expectation Failed"},
      {422, "Unprocessable Entity"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
      {505, "HTTP Version Not Supported"},
  };
  for (const auto& [code, phrase] : kPhrases) {
    if (code == status) return phrase;
  }
  return "Unknown";
}

}  // namespace http
}  // namespace tessel::testing
