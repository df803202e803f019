// An error answer of the Kubernetes API: the HTTP status plus the metav1.Status body
// {"kind":"Status","status":"Failure","message","reason","details":{name,group,kind,causes,
// retryAfterSeconds},"code"}. Some answers are not JSON (a 404 for an unknown path is the text
// "404 page not found"); then the body text is the message and the reason follows the code.
//
// what() is "<code> <reason>: <server message>". It is built from the response only, never
// from the request, so no token, header or request body can reach a log through it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::kube {

struct StatusCause {
  std::string reason;  // FieldValueInvalid, FieldValueRequired, FieldManagerConflict, ...
  std::string message;
  std::string field;  // spec.replicas; may be empty
};

class ApiError : public std::runtime_error {
 public:
  // retry_after_header: the Retry-After response header value, "" when absent.
  ApiError(int http_status, std::string_view body, std::string_view retry_after_header = {});

  // The Status object of a watch ERROR event (no HTTP status of its own: code is taken from
  // the object).
  static ApiError from_status(const nlohmann::json& status);

  int code() const { return code_; }
  const std::string& reason() const { return reason_; }  // Status.reason, else from the code
  const std::string& message() const { return message_; }
  const std::string& details_name() const { return details_name_; }
  const std::string& details_group() const { return details_group_; }
  // The plural resource for NotFound/Conflict/Forbidden, the Kind for Invalid.
  const std::string& details_kind() const { return details_kind_; }
  const std::vector<StatusCause>& causes() const { return causes_; }
  // metadata.continue of a 410 on a paginated list: continues the list inconsistently.
  const std::string& continue_token() const { return continue_token_; }
  // details.retryAfterSeconds, else an integer Retry-After header.
  std::optional<int> retry_after_seconds() const { return retry_after_seconds_; }

  bool is_bad_request() const { return code_ == 400; }
  bool is_unauthorized() const { return code_ == 401; }
  bool is_forbidden() const { return code_ == 403; }
  bool is_not_found() const { return code_ == 404; }
  bool is_not_acceptable() const { return code_ == 406; }
  bool is_conflict() const { return code_ == 409 && reason_ == "Conflict"; }
  bool is_already_exists() const { return code_ == 409 && reason_ == "AlreadyExists"; }
  bool is_gone() const;  // 410, or reason Expired / Gone: relist from scratch
  bool is_unsupported_media_type() const { return code_ == 415; }
  bool is_invalid() const { return code_ == 422; }
  bool is_too_many_requests() const { return code_ == 429; }
  bool is_timeout() const { return code_ == 504 || reason_ == "Timeout"; }
  bool is_retryable() const;  // 429 and 5xx except 501 Not Implemented

 private:
  struct Parsed;  // the fields below, read before std::runtime_error needs its message
  static Parsed parse_status(const nlohmann::json& status, int http_status);
  explicit ApiError(Parsed parsed);

  int code_;
  std::string reason_;
  std::string message_;
  std::string details_name_;
  std::string details_group_;
  std::string details_kind_;
  std::vector<StatusCause> causes_;
  std::string continue_token_;
  std::optional<int> retry_after_seconds_;
};

}  // namespace tessel::kube
