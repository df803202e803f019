// Structured logging for the Kubernetes client: one line per record,
//   2026-11-21T23:01:17.123Z level=info component=kube-client msg="watch ended" resource=pods
// (logfmt: key=value, values quoted when they hold spaces, quotes or '='), written to stderr
// or handed to a sink (tests).
//
// A log line never carries a credential: values of fields whose key names one (token,
// authorization, password, secret, client-key, ...) are replaced by "<redacted>", and so is
// the rest of any "Bearer ..." text in a message or value, wherever it came from.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessel::kube {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

std::string_view to_string(LogLevel level);  // "debug", "info", "warning", "error"
// Parses those names (also "warn"); throws std::invalid_argument naming the text otherwise.
LogLevel parse_log_level(std::string_view text);

struct LogField {
  std::string key;
  std::string value;

  LogField(std::string k, std::string v) : key(std::move(k)), value(std::move(v)) {}
  LogField(std::string k, std::string_view v) : key(std::move(k)), value(v) {}
  LogField(std::string k, const char* v) : key(std::move(k)), value(v) {}
  template <typename Number>
  requires std::is_arithmetic_v<Number> LogField(std::string k, Number v)
      : key(std::move(k)), value(format_number(v)) {}

 private:
  template <typename Number>
  static std::string format_number(Number v) {
    if constexpr (std::is_same_v<Number, bool>) {
      return v ? "true" : "false";
    } else {
      return std::to_string(v);
    }
  }
};

// Receives each finished line, without its newline.
using LogSink = std::function<void(std::string_view line)>;

// Thread-safe; copies share the sink and the level.
class Logger {
 public:
  // An empty sink writes to stderr.
  explicit Logger(std::string component = "kube", LogLevel level = LogLevel::kInfo,
                  LogSink sink = {});

  // A logger that adds `fields` to every record, sharing this one's sink and level.
  Logger with(std::initializer_list<LogField> fields) const;

  bool enabled(LogLevel level) const;
  void set_level(LogLevel level);

  void log(LogLevel level, std::string_view message, std::vector<LogField> fields = {}) const;
  void debug(std::string_view message, std::vector<LogField> fields = {}) const {
    log(LogLevel::kDebug, message, std::move(fields));
  }
  void info(std::string_view message, std::vector<LogField> fields = {}) const {
    log(LogLevel::kInfo, message, std::move(fields));
  }
  void warning(std::string_view message, std::vector<LogField> fields = {}) const {
    log(LogLevel::kWarning, message, std::move(fields));
  }
  void error(std::string_view message, std::vector<LogField> fields = {}) const {
    log(LogLevel::kError, message, std::move(fields));
  }

 private:
  struct Shared {
    std::mutex mutex;  // serialises writes to the sink
    LogSink sink;
    LogLevel level;
  };

  std::shared_ptr<Shared> shared_;
  std::string component_;
  std::vector<LogField> fields_;
};

// One logfmt record as Logger writes it after the timestamp (exposed for tests):
// level=... component=... msg="..." k=v ..., credentials redacted.
std::string format_log_record(LogLevel level, std::string_view component, std::string_view message,
                              const std::vector<LogField>& fields);

// Whether a field key names a credential whose value is never logged.
bool is_sensitive_key(std::string_view key);

}  // namespace tessel::kube
