#include "tests/support/table_converter_time.h"

#include <ctime>
#include <regex>

namespace tessel::testing {

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(const std::string& text) {
  static const std::regex layout(
      R"((\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2})))");
  std::smatch m;
  if (!std::regex_match(text, m, layout)) return std::nullopt;
  std::tm parts{};
  parts.tm_year = std::stoi(m[1]) - 1900;
  parts.tm_mon = std::stoi(m[2]) - 1;
  parts.tm_mday = std::stoi(m[3]);
  parts.tm_hour = std::stoi(m[4]);
  parts.tm_min = std::stoi(m[5]);
  parts.tm_sec = std::stoi(m[6]);
  if (parts.tm_mon > 11 || parts.tm_mday < 1 || parts.tm_mday > 31 || parts.tm_hour > 23 ||
      parts.tm_min > 59 || parts.tm_sec > 59) {
    return std::nullopt;
  }
  auto time = std::chrono::system_clock::from_time_t(timegm(&parts));
  if (m[7].matched) {
    const std::string digits = m[7].str().substr(1, 9);
    const long nanos = std::stol(digits + std::string(9 - digits.size(), '0'));
    time += std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::nanoseconds(nanos));
  }
  if (m[9].matched) {
    const auto offset =
        std::chrono::hours(std::stoi(m[10])) + std::chrono::minutes(std::stoi(m[11]));
    time += m[9] == "+" ? -offset : offset;
  }
  return time;
}

std::string human_duration(std::chrono::system_clock::duration elapsed) {
  using std::to_string;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(elapsed).count();
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return to_string(seconds) + "s";
  const auto minutes = seconds / 60;
  if (minutes < 10) {
    const auto s = seconds % 60;
    return s == 0 ? to_string(minutes) + "m" : to_string(minutes) + "m" + to_string(s) + "s";
  }
  if (minutes < 60 * 3) return to_string(minutes) + "m";
  const auto hours = minutes / 60;
  if (hours < 8) {
    const auto m = minutes % 60;
    return m == 0 ? to_string(hours) + "h" : to_string(hours) + "h" + to_string(m) + "m";
  }
  if (hours < 48) return to_string(hours) + "h";
  if (hours < 24 * 8) {
    const auto h = hours % 24;
    return h == 0 ? to_string(hours / 24) + "d" : to_string(hours / 24) + "d" + to_string(h) + "h";
  }
  if (hours < 24 * 365 * 2) return to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) {
    const auto days = (hours / 24) % 365;
    return days == 0 ? to_string(hours / 24 / 365) + "y"
                     : to_string(hours / 24 / 365) + "y" + to_string(days) + "d";
  }
  return to_string(hours / 24 / 365) + "y";
}

std::string age_cell(const nlohmann::json& timestamp, std::chrono::system_clock::time_point now) {
  if (!timestamp.is_string() || timestamp.get<std::string>().empty()) return "<unknown>";
  const auto time = parse_rfc3339(timestamp.get<std::string>());
  if (!time) return "<invalid>";
  return human_duration(now - *time);
}

std::string rfc3339_cell(const nlohmann::json& timestamp) {
  const auto time =
      timestamp.is_string() ? parse_rfc3339(timestamp.get<std::string>()) : std::nullopt;
  if (!time) return "0001-01-01T00:00:00Z";
  const std::time_t seconds = std::chrono::system_clock::to_time_t(*time);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

}  // namespace tessel::testing
