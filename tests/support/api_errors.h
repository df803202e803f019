// The error answers of the Kubernetes API test server: metav1.Status bodies worded as
// kube-apiserver v1.26 words them (../shared/specs/kube-api-observed.md section 2.2), and the
// plain-text 404 of an unknown path. Handlers throw ApiError; the server turns it into the
// HTTP response.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/structural_schema.h"

namespace tessel::testing {

// A group and plural resource, as error messages name them: "trainingjobs.tessel.dev", or
// just "pods" for the core group.
struct GroupResource {
  std::string group;
  std::string resource;

  std::string qualified() const { return group.empty() ? resource : resource + "." + group; }
};

class ApiError : public std::runtime_error {
 public:
  // A JSON Status answer with this HTTP status.
  ApiError(int http_status, nlohmann::json status_body);
  // A plain-text answer ("404 page not found\n").
  static ApiError plain_text(int http_status, std::string text);

  int http_status() const { return http_status_; }
  bool is_plain_text() const { return plain_text_; }
  const nlohmann::json& body() const { return body_; }  // a Status, or the text as a string
  // Extra response headers (Retry-After).
  const std::vector<std::pair<std::string, std::string>>& headers() const { return headers_; }
  ApiError& with_header(std::string name, std::string value);

 private:
  int http_status_;
  bool plain_text_ = false;
  nlohmann::json body_;
  std::vector<std::pair<std::string, std::string>> headers_;
};

// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",...}; details is left
// out when null.
nlohmann::json failure_status(int code, const std::string& reason, const std::string& message,
                              const nlohmann::json& details = nullptr);
// The Status of a successful delete: details {name, group, kind (plural), uid}.
nlohmann::json success_status(const GroupResource& resource, const std::string& name,
                              const std::string& uid);
// details {name, group, kind}, with empty entries left out as the server does.
nlohmann::json resource_details(const GroupResource& resource, const std::string& name);

ApiError page_not_found();  // text/plain "404 page not found\n"
ApiError not_found(const GroupResource& resource, const std::string& name);
ApiError already_exists(const GroupResource& resource, const std::string& name);
// The optimistic-concurrency conflict: "Operation cannot be fulfilled on ...".
ApiError conflict(const GroupResource& resource, const std::string& name);
// A Conflict with a message of its own (failed delete preconditions).
ApiError conflict_with_message(const GroupResource& resource, const std::string& name,
                               const std::string& message);
// 422 Invalid. `kind` is what the message and details name: the Kind for schema and
// validation errors ("TrainingJob"), the plural resource for a missing resourceVersion.
ApiError invalid(const std::string& kind, const std::string& group, const std::string& name,
                 const std::vector<FieldError>& errors);
ApiError bad_request(const std::string& message);
ApiError method_not_allowed();
ApiError not_acceptable();
ApiError unsupported_media_type(const std::vector<std::string>& accepted);
ApiError unauthorized();
// "<resource> "<name>" is forbidden: <reason>", details {name, group, kind}.
ApiError forbidden(const GroupResource& resource, const std::string& name,
                   const std::string& reason);
// 410 Expired, with metadata.continue when a fresh continue token is offered.
ApiError expired(const std::string& message, const std::string& continue_token = "");
// The 504 of a list from a resourceVersion the server has not reached.
ApiError too_large_resource_version(std::int64_t requested, std::int64_t current);
ApiError internal_error(const std::string& message);
// An injected fault: 429, 500, 503, ... with the reason and message the real server uses
// for that code, and Retry-After when retry_after_seconds >= 0.
ApiError injected_fault(int http_status, int retry_after_seconds);

}  // namespace tessel::testing
