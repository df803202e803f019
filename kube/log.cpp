#include "kube/log.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace tessel::kube {

namespace {

constexpr std::string_view kRedacted = "<redacted>";

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Replaces the credential after each "Bearer " / "Basic " (any case) with <redacted>: the
// credential runs to the next whitespace, quote or comma.
std::string redact_schemes(std::string_view text) {
  static constexpr std::array<std::string_view, 2> kSchemes = {"bearer ", "basic "};
  const std::string folded = lower(text);
  std::string out;
  std::size_t copied = 0;
  std::size_t pos = 0;
  while (pos < folded.size()) {
    std::size_t found = std::string::npos;
    std::size_t length = 0;
    for (std::string_view scheme : kSchemes) {
      const std::size_t at = folded.find(scheme, pos);
      if (at < found) {
        found = at;
        length = scheme.size();
      }
    }
    if (found == std::string::npos) break;
    std::size_t start = found + length;
    while (start < text.size() && text[start] == ' ') ++start;
    std::size_t end = start;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) &&
           text[end] != '"' && text[end] != ',') {
      ++end;
    }
    if (end > start) {
      out.append(text.substr(copied, start - copied));
      out.append(kRedacted);
      copied = end;
    }
    pos = std::max(end, found + 1);
  }
  out.append(text.substr(copied));
  return out;
}

bool needs_quotes(std::string_view value) {
  if (value.empty()) return true;
  return std::any_of(value.begin(), value.end(), [](unsigned char c) {
    return c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f;
  });
}

void append_value(std::string& out, std::string_view value) {
  if (!needs_quotes(value)) {
    out.append(value);
    return;
  }
  out.push_back('"');
  for (const char c : value) {
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
          out.append(escaped);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

// Keys are identifiers: anything else becomes '_', so a key cannot forge another field.
std::string clean_key(std::string_view key) {
  std::string out;
  for (const char c : key) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '/';
    out.push_back(ok ? c : '_');
  }
  return out.empty() ? "_" : out;
}

void append_field(std::string& out, std::string_view key, std::string_view value) {
  out.push_back(' ');
  const std::string cleaned = clean_key(key);
  out.append(cleaned);
  out.push_back('=');
  if (is_sensitive_key(cleaned)) {
    append_value(out, kRedacted);
  } else {
    append_value(out, redact_schemes(value));
  }
}

std::string timestamp_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[96];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis.count()));
  return text;
}

}  // namespace

std::string_view to_string(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "unknown";
}

LogLevel parse_log_level(std::string_view text) {
  const std::string folded = lower(text);
  if (folded == "debug") return LogLevel::kDebug;
  if (folded == "info") return LogLevel::kInfo;
  if (folded == "warning" || folded == "warn") return LogLevel::kWarning;
  if (folded == "error") return LogLevel::kError;
  throw std::invalid_argument("log level \"" + std::string(text) +
                              "\": expected debug, info, warning or error");
}

bool is_sensitive_key(std::string_view key) {
  // Substrings of keys, lower case with '-' and '_' removed ("client-key-data" gives
  // "clientkeydata"). A plain "key" is a work-queue key and stays readable.
  static constexpr std::array<std::string_view, 9> kWords = {
      "token",  "authorization", "password", "secret",   "credential",
      "cookie", "keydata",       "private",  "clientkey"};
  std::string folded;
  for (const char c : lower(key)) {
    if (c != '-' && c != '_') folded.push_back(c);
  }
  return std::any_of(kWords.begin(), kWords.end(),
                     [&](std::string_view word) { return folded.find(word) != std::string::npos; });
}

std::string format_log_record(LogLevel level, std::string_view component, std::string_view message,
                              const std::vector<LogField>& fields) {
  std::string out = "level=";
  out.append(to_string(level));
  if (!component.empty()) append_field(out, "component", component);
  append_field(out, "msg", message);
  for (const LogField& field : fields) append_field(out, field.key, field.value);
  return out;
}

Logger::Logger(std::string component, LogLevel level, LogSink sink)
    : shared_(std::make_shared<Shared>()), component_(std::move(component)) {
  shared_->sink = std::move(sink);
  shared_->level = level;
}

Logger Logger::with(std::initializer_list<LogField> fields) const {
  Logger copy = *this;
  copy.fields_.insert(copy.fields_.end(), fields.begin(), fields.end());
  return copy;
}

bool Logger::enabled(LogLevel level) const {
  std::lock_guard lock(shared_->mutex);
  return level >= shared_->level;
}

void Logger::set_level(LogLevel level) {
  std::lock_guard lock(shared_->mutex);
  shared_->level = level;
}

void Logger::log(LogLevel level, std::string_view message, std::vector<LogField> fields) const {
  if (!enabled(level)) return;
  if (!fields_.empty()) fields.insert(fields.begin(), fields_.begin(), fields_.end());
  const std::string line =
      timestamp_now() + " " + format_log_record(level, component_, message, fields);
  std::lock_guard lock(shared_->mutex);
  if (shared_->sink) {
    shared_->sink(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace tessel::kube
