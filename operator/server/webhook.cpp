#include "operator/server/webhook.h"

#include <nlohmann/json.hpp>

#include "operator/server/admission.h"

namespace tessel::server {
namespace {

HttpsResponse answer_review(const HttpsRequest& request,
                            nlohmann::json (*review)(const nlohmann::json&)) {
  const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, false);
  if (body.is_discarded()) return {400, "text/plain", "the body is not JSON"};
  try {
    return {200, "application/json", review(body).dump()};
  } catch (const AdmissionError& e) {
    return {400, "text/plain", e.what()};
  }
}

}  // namespace

HttpsResponse handle_validate(const HttpsRequest& request) {
  return answer_review(request, review_admission);
}

HttpsResponse handle_mutate(const HttpsRequest& request) {
  return answer_review(request, review_defaulting);
}

void add_webhook_routes(HttpsRouter& router) {
  router.route("POST", "/validate", handle_validate);
  router.route("POST", "/mutate", handle_mutate);
}

}  // namespace tessel::server
