#include "operator/server/admission.h"

#include <string>
#include <vector>

#include "api/crds.h"
#include "api/trainingjob.h"
#include "kube/base64.h"

namespace tessel::server {
namespace {

using nlohmann::json;

// The request of an AdmissionReview, and what the webhooks need of it.
struct AdmissionRequest {
  json request;
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  std::string kind;       // request.kind.kind
  // A write of a tessel.dev object itself: not a deletion, a connect, a subresource or a kind of
  // another group, which are allowed as they are.
  bool examined = false;
};

// A string field, or "" when it is missing or not a string (json::value throws for another type:
// a review with "kind": {} must be answered 400 like any other malformed review).
std::string string_field(const json& object, const char* key) {
  const auto it = object.find(key);  // end() for an object without it, and for a non-object
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// The one parser of an AdmissionReview; throws AdmissionError for anything else.
AdmissionRequest parse_review(const json& review) {
  if (!review.is_object() || string_field(review, "apiVersion") != "admission.k8s.io/v1" ||
      string_field(review, "kind") != "AdmissionReview") {
    throw AdmissionError("not an admission.k8s.io/v1 AdmissionReview");
  }
  AdmissionRequest parsed;
  parsed.request = review.value("request", json());
  if (!parsed.request.is_object() || !parsed.request.contains("uid") ||
      !parsed.request["uid"].is_string()) {
    throw AdmissionError("AdmissionReview without request.uid");
  }
  parsed.operation = string_field(parsed.request, "operation");
  const json kind = parsed.request.value("kind", json::object());
  parsed.kind = string_field(kind, "kind");
  const bool ours = string_field(kind, "group") == "tessel.dev";
  parsed.examined = ours && parsed.operation != "DELETE" && parsed.operation != "CONNECT" &&
                    string_field(parsed.request, "subResource").empty();
  return parsed;
}

// The AdmissionReview answering `parsed` with `response` (uid added; allowed unless it says).
json answer(const AdmissionRequest& parsed, json response = json::object()) {
  response["uid"] = parsed.request["uid"];
  if (!response.contains("allowed")) response["allowed"] = true;
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"response", std::move(response)}};
}

std::string joined(const std::vector<api::FieldError>& errors) {
  std::string text;
  for (const api::FieldError& e : errors) text += (text.empty() ? "" : "; ") + e.text();
  return text;
}

std::vector<api::FieldError> membercluster_errors(json object) {
  std::vector<api::FieldError> errors;
  const json name = object.value("metadata", json::object()).value("name", json());
  if (!name.is_string() || name.get<std::string>().empty())
    errors.push_back({"metadata.name", "required"});
  api::membercluster_schema().apply_defaults(object);
  const std::vector<api::FieldError> schema = api::membercluster_schema().validate(object);
  errors.insert(errors.end(), schema.begin(), schema.end());
  return errors;
}

}  // namespace

json review_admission(const json& review) {
  const AdmissionRequest parsed = parse_review(review);
  if (!parsed.examined) return answer(parsed);
  const json object = parsed.request.value("object", json());
  std::vector<api::FieldError> errors;
  if (parsed.kind == "TrainingJob") {
    json defaulted = object;
    errors = api::trainingjob_errors(defaulted);
    if (parsed.operation == "UPDATE" && errors.empty()) {
      errors =
          api::trainingjob_update_errors(parsed.request.value("oldObject", json::object()), object);
    }
  } else if (parsed.kind == "MemberCluster") {
    errors = membercluster_errors(object);
  } else {
    errors.push_back(
        {"kind", "tessel.dev has no kind " + (parsed.kind.empty() ? "''" : parsed.kind)});
  }
  if (errors.empty()) return answer(parsed);
  return answer(parsed,
                {{"allowed", false},
                 {"status", {{"code", 422}, {"reason", "Invalid"}, {"message", joined(errors)}}}});
}

json review_defaulting(const json& review) {
  const AdmissionRequest parsed = parse_review(review);
  if (!parsed.examined) return answer(parsed);
  const json object = parsed.request.value("object", json());
  if (!object.is_object()) return answer(parsed);  // nothing to default; validation refuses it
  json defaulted = object;
  if (parsed.kind == "TrainingJob") {
    api::trainingjob_errors(defaulted);  // defaults in place; the errors are validation's
  } else if (parsed.kind == "MemberCluster") {
    api::membercluster_schema().apply_defaults(defaulted);
  }
  // Defaulting only adds fields, so the difference is "add" operations.
  const json patch = json::diff(object, defaulted);
  if (patch.empty()) return answer(parsed);
  return answer(parsed, {{"patchType", "JSONPatch"}, {"patch", kube::base64_encode(patch.dump())}});
}

}  // namespace tessel::server
