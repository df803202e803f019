#include "operator/server/admission.h"

#include <string>
#include <vector>

#include "api/crds.h"
#include "api/trainingjob.h"

namespace tessel::server {
namespace {

using nlohmann::json;

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
  if (!review.is_object() || review.value("apiVersion", "") != "admission.k8s.io/v1" ||
      review.value("kind", "") != "AdmissionReview") {
    throw AdmissionError("not an admission.k8s.io/v1 AdmissionReview");
  }
  const json request = review.value("request", json());
  if (!request.is_object() || !request.contains("uid") || !request["uid"].is_string()) {
    throw AdmissionError("AdmissionReview without request.uid");
  }
  json response = {{"uid", request["uid"]}, {"allowed", true}};
  const json answer = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}};
  const auto reply = [&](json r) {
    json out = answer;
    out["response"] = std::move(r);
    return out;
  };
  const std::string operation = request.value("operation", "");
  const json kind = request.value("kind", json::object());
  const bool ours = kind.value("group", "") == "tessel.dev";
  if (!ours || operation == "DELETE" || operation == "CONNECT" ||
      !request.value("subResource", "").empty()) {
    return reply(response);
  }
  const json object = request.value("object", json());
  std::vector<api::FieldError> errors;
  if (kind.value("kind", "") == "TrainingJob") {
    json defaulted = object;
    errors = api::trainingjob_errors(defaulted);
    if (operation == "UPDATE" && errors.empty()) {
      errors = api::trainingjob_update_errors(request.value("oldObject", json::object()), object);
    }
  } else if (kind.value("kind", "") == "MemberCluster") {
    errors = membercluster_errors(object);
  } else {
    errors.push_back({"kind", "tessel.dev has no kind " + kind.value("kind", std::string("''"))});
  }
  if (errors.empty()) return reply(response);
  response["allowed"] = false;
  response["status"] = {{"code", 422}, {"reason", "Invalid"}, {"message", joined(errors)}};
  return reply(response);
}

}  // namespace tessel::server
