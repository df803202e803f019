#include "tests/support/structural_schema_formats.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <regex>

namespace tessel::testing {
namespace {

bool matches(const std::string& value, const char* pattern,
             std::regex::flag_type flags = std::regex::ECMAScript) {
  return std::regex_match(value, std::regex(pattern, flags));
}

bool is_date(const std::string& value) {
  std::smatch m;
  static const std::regex layout(R"((\d{4})-(\d{2})-(\d{2}))");
  if (!std::regex_match(value, m, layout)) return false;
  const int month = std::stoi(m[2]);
  const int day = std::stoi(m[3]);
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

// strfmt.ParseDateTime: RFC 3339 with optional fraction, with or without a zone, 'T' or ' '.
bool is_date_time(const std::string& value) {
  std::smatch m;
  static const std::regex layout(
      R"((\d{4}-\d{2}-\d{2})[T ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:?\d{2})?)");
  if (!std::regex_match(value, m, layout) || !is_date(m[1])) return false;
  return std::stoi(m[2]) < 24 && std::stoi(m[3]) < 60 && std::stoi(m[4]) < 60;
}

// Go's time.ParseDuration ("1h30m", "-1.5s", "300ms") or strfmt's "3 days" forms.
bool is_duration(const std::string& value) {
  return matches(value, R"([-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+|0)") ||
         matches(value, R"(\d+\s*(ns|us|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|)"
                        R"(seconds?|minutes?|hours?|days?|weeks?|sec|secs|min|mins|hr|hrs))");
}

bool is_ipv4(const std::string& value) {
  in_addr address{};
  return inet_pton(AF_INET, value.c_str(), &address) == 1;
}

bool is_ipv6(const std::string& value) {
  in6_addr address{};
  return inet_pton(AF_INET6, value.c_str(), &address) == 1;
}

bool is_cidr(const std::string& value) {
  const auto slash = value.find('/');
  if (slash == std::string::npos) return false;
  const std::string ip = value.substr(0, slash);
  const std::string bits = value.substr(slash + 1);
  if (bits.empty() || bits.size() > 3 || !std::all_of(bits.begin(), bits.end(), ::isdigit)) {
    return false;
  }
  const int prefix = std::stoi(bits);
  if (is_ipv4(ip)) return prefix <= 32;
  return is_ipv6(ip) && prefix <= 128;
}

bool is_hostname(const std::string& value) {
  if (value.empty() || value.size() > 255) return false;
  std::size_t start = 0;
  while (true) {
    const auto dot = value.find('.', start);
    const std::string label = value.substr(start, dot == std::string::npos ? dot : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (const char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' &&
          static_cast<unsigned char>(c) < 0x80) {
        return false;
      }
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

bool is_base64(const std::string& value) {
  return value.size() % 4 == 0 && matches(value, "[A-Za-z0-9+/]*={0,2}");
}

bool luhn(const std::string& digits) {
  int sum = 0;
  bool twice = false;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    int d = *it - '0';
    if (twice && (d *= 2) > 9) d -= 9;
    sum += d;
    twice = !twice;
  }
  return sum % 10 == 0;
}

std::string digits_and_x(const std::string& value) {
  std::string kept;
  for (const char c : value) {
    if (c != '-' && c != ' ') kept += c;
  }
  return kept;
}

bool is_isbn10(const std::string& value) {
  const std::string isbn = digits_and_x(value);
  if (!matches(isbn, "[0-9]{9}[0-9X]")) return false;
  int sum = 0;
  for (int i = 0; i < 10; ++i) sum += (i + 1) * (isbn[i] == 'X' ? 10 : isbn[i] - '0');
  return sum % 11 == 0;
}

bool is_isbn13(const std::string& value) {
  const std::string isbn = digits_and_x(value);
  if (!matches(isbn, "[0-9]{13}")) return false;
  int sum = 0;
  for (int i = 0; i < 12; ++i) sum += (i % 2 == 0 ? 1 : 3) * (isbn[i] - '0');
  return (10 - sum % 10) % 10 == isbn[12] - '0';
}

bool is_credit_card(const std::string& value) {
  std::string digits;
  for (const char c : value) {
    if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
  }
  return matches(digits,
                 "4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|"
                 "3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\\d{3})\\d{11}") &&
         luhn(digits);
}

bool is_uri(const std::string& value) {
  // net/url.ParseRequestURI: an absolute URI or an absolute path, without spaces.
  return value.find(' ') == std::string::npos &&
         (matches(value, "[A-Za-z][A-Za-z0-9+.-]*:.+") || (!value.empty() && value[0] == '/'));
}

const std::map<std::string, std::function<bool(const std::string&)>>& checkers() {
  static const std::map<std::string, std::function<bool(const std::string&)>> table = {
      {"bsonobjectid", [](const std::string& v) { return matches(v, "[0-9a-fA-F]{24}"); }},
      {"uri", is_uri},
      {"email", [](const std::string& v) { return matches(v, R"([^@\s<>]+@[^@\s<>]+)"); }},
      {"hostname", is_hostname},
      {"ipv4", is_ipv4},
      {"ipv6", is_ipv6},
      {"cidr", is_cidr},
      {"mac",
       [](const std::string& v) {
         return matches(v,
                        "([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}|"
                        "([0-9A-Fa-f]{4}\\.){2}[0-9A-Fa-f]{4}");
       }},
      {"uuid",
       [](const std::string& v) {
         return matches(v, "[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}",
                        std::regex::ECMAScript | std::regex::icase);
       }},
      {"uuid3",
       [](const std::string& v) {
         return matches(v, "[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}",
                        std::regex::ECMAScript | std::regex::icase);
       }},
      {"uuid4",
       [](const std::string& v) {
         return matches(v,
                        "[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}",
                        std::regex::ECMAScript | std::regex::icase);
       }},
      {"uuid5",
       [](const std::string& v) {
         return matches(v,
                        "[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}",
                        std::regex::ECMAScript | std::regex::icase);
       }},
      {"isbn", [](const std::string& v) { return is_isbn10(v) || is_isbn13(v); }},
      {"isbn10", is_isbn10},
      {"isbn13", is_isbn13},
      {"creditcard", is_credit_card},
      {"ssn", [](const std::string& v) { return matches(v, R"(\d{3}[- ]?\d{2}[- ]?\d{4})"); }},
      {"hexcolor",
       [](const std::string& v) { return matches(v, "#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})"); }},
      {"rgbcolor",
       [](const std::string& v) {
         return matches(v, R"(rgb\(\s*\d{1,3}\s*,\s*\d{1,3}\s*,\s*\d{1,3}\s*\))");
       }},
      {"byte", is_base64},
      {"password", [](const std::string&) { return true; }},
      {"date", is_date},
      {"duration", is_duration},
      {"datetime", is_date_time},
  };
  return table;
}

}  // namespace

bool format_accepts(const std::string& format, const std::string& value) {
  std::string normalized = format;
  normalized.erase(std::remove(normalized.begin(), normalized.end(), '-'), normalized.end());
  const auto checker = checkers().find(normalized);
  return checker == checkers().end() || checker->second(value);
}

}  // namespace tessel::testing
