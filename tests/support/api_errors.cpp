#include "tests/support/api_errors.h"

namespace tessel::testing {

using nlohmann::json;

ApiError::ApiError(int http_status, json status_body)
    : std::runtime_error(
          status_body.value("message", std::string("HTTP ") + std::to_string(http_status))),
      http_status_(http_status),
      body_(std::move(status_body)) {}

ApiError ApiError::plain_text(int http_status, std::string text) {
  ApiError error(http_status, json::object({{"message", text}}));
  error.plain_text_ = true;
  error.body_ = std::move(text);
  return error;
}

ApiError& ApiError::with_header(std::string name, std::string value) {
  headers_.emplace_back(std::move(name), std::move(value));
  return *this;
}

json failure_status(int code, const std::string& reason, const std::string& message,
                    const json& details) {
  json status = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
                 {"status", "Failure"}, {"message", message}, {"reason", reason},
                 {"code", code}};
  if (!details.is_null()) status["details"] = details;
  return status;
}

json resource_details(const GroupResource& resource, const std::string& name) {
  json details = json::object();
  if (!name.empty()) details["name"] = name;
  if (!resource.group.empty()) details["group"] = resource.group;
  if (!resource.resource.empty()) details["kind"] = resource.resource;
  return details;
}

json success_status(const GroupResource& resource, const std::string& name,
                    const std::string& uid) {
  json details = resource_details(resource, name);
  details["uid"] = uid;
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Success"},
          {"details", details}};
}

ApiError page_not_found() { return ApiError::plain_text(404, "404 page not found\n"); }

ApiError not_found(const GroupResource& resource, const std::string& name) {
  return ApiError(
      404, failure_status(404, "NotFound", resource.qualified() + " \"" + name + "\" not found",
                          resource_details(resource, name)));
}

ApiError already_exists(const GroupResource& resource, const std::string& name) {
  return ApiError(409, failure_status(409, "AlreadyExists",
                                      resource.qualified() + " \"" + name + "\" already exists",
                                      resource_details(resource, name)));
}

ApiError conflict(const GroupResource& resource, const std::string& name) {
  return conflict_with_message(
      resource, name,
      "the object has been modified; please apply your changes to the latest version and try "
      "again");
}

ApiError conflict_with_message(const GroupResource& resource, const std::string& name,
                               const std::string& message) {
  return ApiError(409, failure_status(409, "Conflict",
                                      "Operation cannot be fulfilled on " + resource.qualified() +
                                          " \"" + name + "\": " + message,
                                      resource_details(resource, name)));
}

ApiError invalid(const std::string& kind, const std::string& group, const std::string& name,
                 const std::vector<FieldError>& errors) {
  return ApiError(422, invalid_status(kind, group, name, errors));
}

ApiError bad_request(const std::string& message) {
  return ApiError(400, failure_status(400, "BadRequest", message));
}

ApiError method_not_allowed() {
  return ApiError(405, failure_status(405, "MethodNotAllowed",
                                      "the server does not allow this method on the requested "
                                      "resource",
                                      json::object()));
}

ApiError not_acceptable() {
  return ApiError(406, failure_status(406, "NotAcceptable",
                                      "only the following media types are accepted: "
                                      "application/json, application/yaml, "
                                      "application/vnd.kubernetes.protobuf"));
}

ApiError unsupported_media_type(const std::vector<std::string>& accepted) {
  std::string list;
  for (const std::string& type : accepted) list += (list.empty() ? "" : ", ") + type;
  return ApiError(415, failure_status(415, "UnsupportedMediaType",
                                      "the body of the request was in an unknown format - "
                                      "accepted media types include: " +
                                          list));
}

ApiError unauthorized() {
  return ApiError(401, failure_status(401, "Unauthorized", "Unauthorized"));
}

ApiError forbidden(const GroupResource& resource, const std::string& name,
                   const std::string& reason) {
  std::string subject = resource.qualified();
  if (!name.empty()) subject += " \"" + name + "\"";
  const std::string message =
      subject.empty() ? "forbidden: " + reason : subject + " is forbidden: " + reason;
  return ApiError(403, failure_status(403, "Forbidden", message, resource_details(resource, name)));
}

ApiError expired(const std::string& message, const std::string& continue_token) {
  json status = failure_status(410, "Expired", message);
  if (!continue_token.empty()) status["metadata"]["continue"] = continue_token;
  return ApiError(410, status);
}

ApiError too_large_resource_version(std::int64_t requested, std::int64_t current) {
  const json details = {{"causes", json::array({{{"reason", "ResourceVersionTooLarge"},
                                                 {"message", "Too large resource version"}}})},
                        {"retryAfterSeconds", 1}};
  ApiError error(
      504, failure_status(504, "Timeout",
                          "Timeout: Too large resource version: " + std::to_string(requested) +
                              ", current: " + std::to_string(current),
                          details));
  error.with_header("Retry-After", "1");
  return error;
}

ApiError internal_error(const std::string& message) {
  return ApiError(500, failure_status(500, "InternalError", "Internal error occurred: " + message,
                                      {{"causes", json::array({{{"message", message}}})}}));
}

ApiError injected_fault(int http_status, int retry_after_seconds) {
  std::string reason;
  std::string message;
  switch (http_status) {
    case 429:
      reason = "TooManyRequests";
      message = "Too many requests, please try again later.";
      break;
    case 500:
      reason = "InternalError";
      message = "Internal error occurred: injected fault";
      break;
    case 503:
      reason = "ServiceUnavailable";
      message = "The server is currently unable to handle the request";
      break;
    case 504:
      reason = "Timeout";
      message =
          "The server was unable to return a response in the time allotted, but may "
          "still be processing the request";
      break;
    default:
      reason = "InternalError";
      message = "injected fault with HTTP status " + std::to_string(http_status);
  }
  json details = json::object();
  if (retry_after_seconds >= 0) details["retryAfterSeconds"] = retry_after_seconds;
  ApiError error(http_status, failure_status(http_status, reason, message, details));
  if (retry_after_seconds >= 0)
    error.with_header("Retry-After", std::to_string(retry_after_seconds));
  return error;
}

}  // namespace tessel::testing
