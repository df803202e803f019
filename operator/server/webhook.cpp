#include "operator/server/webhook.h"

#include <nlohmann/json.hpp>

#include "operator/server/admission.h"

namespace tessel::server {

HttpsResponse handle_webhook(const HttpsRequest& request) {
  if (request.path != "/validate") return {404, "text/plain", request.path + ": not found"};
  if (request.method != "POST") return {405, "text/plain", "only POST is served"};
  const nlohmann::json review = nlohmann::json::parse(request.body, nullptr, false);
  if (review.is_discarded()) return {400, "text/plain", "the body is not JSON"};
  try {
    return {200, "application/json", review_admission(review).dump()};
  } catch (const AdmissionError& e) {
    return {400, "text/plain", e.what()};
  }
}

}  // namespace tessel::server
