#include "kube/api_error.h"

#include <charconv>

namespace tessel::kube {

struct ApiError::Parsed {
  int code = 0;
  std::string reason;
  std::string message;
  std::string details_name;
  std::string details_group;
  std::string details_kind;
  std::vector<StatusCause> causes;
  std::string continue_token;
  std::optional<int> retry_after_seconds;
};

namespace {

using nlohmann::json;

// Keeps an HTML error page from a proxy from flooding a log line.
constexpr std::size_t kMaxRawMessage = 512;

// metav1.StatusReason for a code, as client-go names it when the body carries none.
std::string reason_for_code(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

std::string string_field(const json& obj, const char* key) {
  if (!obj.is_object()) return {};
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string raw_message(std::string_view body) {
  const auto first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  body = body.substr(first, body.find_last_not_of(" \t\r\n") - first + 1);
  if (body.size() <= kMaxRawMessage) return std::string(body);
  return std::string(body.substr(0, kMaxRawMessage)) + "...";
}

std::optional<int> parse_retry_after(std::string_view header) {
  int seconds = 0;
  const auto [end, error] = std::from_chars(header.data(), header.data() + header.size(), seconds);
  if (header.empty() || error != std::errc() || end != header.data() + header.size() ||
      seconds < 0) {
    return std::nullopt;  // absent, or the HTTP-date form, which the API server does not send
  }
  return seconds;
}

std::string describe(int code, const std::string& reason, const std::string& message) {
  std::string text = std::to_string(code) + " " + reason;
  return message.empty() ? text : text + ": " + message;
}

}  // namespace

ApiError::Parsed ApiError::parse_status(const json& status, int http_status) {
  Parsed parsed;
  parsed.code = http_status;
  if (!status.is_object()) return parsed;
  if (parsed.code == 0) {
    const auto code = status.find("code");
    if (code != status.end() && code->is_number_integer()) parsed.code = code->get<int>();
  }
  parsed.reason = string_field(status, "reason");
  parsed.message = string_field(status, "message");
  parsed.continue_token = string_field(status.value("metadata", json::object()), "continue");
  const json details = status.value("details", json::object());
  if (details.is_object()) {
    parsed.details_name = string_field(details, "name");
    parsed.details_group = string_field(details, "group");
    parsed.details_kind = string_field(details, "kind");
    for (const json& cause : details.value("causes", json::array())) {
      parsed.causes.push_back({string_field(cause, "reason"), string_field(cause, "message"),
                               string_field(cause, "field")});
    }
    const auto retry = details.find("retryAfterSeconds");
    if (retry != details.end() && retry->is_number_integer() && retry->get<int>() > 0) {
      parsed.retry_after_seconds = retry->get<int>();
    }
  }
  return parsed;
}

ApiError::ApiError(int http_status, std::string_view body, std::string_view retry_after_header)
    : ApiError([&] {
        json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
        Parsed parsed;
        if (status.is_object() && status.value("kind", "") == "Status") {
          parsed = parse_status(status, http_status);
        } else {
          parsed.code = http_status;
          parsed.message = raw_message(body);
        }
        if (!parsed.retry_after_seconds) {
          parsed.retry_after_seconds = parse_retry_after(retry_after_header);
        }
        return parsed;
      }()) {}

ApiError ApiError::from_status(const json& status) { return ApiError(parse_status(status, 0)); }

ApiError::ApiError(Parsed parsed)
    : std::runtime_error(describe(
          parsed.code, parsed.reason.empty() ? reason_for_code(parsed.code) : parsed.reason,
          parsed.message)),
      code_(parsed.code),
      reason_(parsed.reason.empty() ? reason_for_code(parsed.code) : std::move(parsed.reason)),
      message_(std::move(parsed.message)),
      details_name_(std::move(parsed.details_name)),
      details_group_(std::move(parsed.details_group)),
      details_kind_(std::move(parsed.details_kind)),
      causes_(std::move(parsed.causes)),
      continue_token_(std::move(parsed.continue_token)),
      retry_after_seconds_(parsed.retry_after_seconds) {}

bool ApiError::is_gone() const { return code_ == 410 || reason_ == "Expired" || reason_ == "Gone"; }

bool ApiError::is_retryable() const {
  return code_ == 429 || (code_ >= 500 && code_ <= 599 && code_ != 501);
}

}  // namespace tessel::kube
