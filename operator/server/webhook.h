// The admission webhooks' HTTP face: POST /validate and POST /mutate with an AdmissionReview
// (JSON) are answered with review_admission's and review_defaulting's AdmissionReview; a body
// that is not JSON or not an AdmissionReview v1 is answered 400.
#pragma once

#include "operator/server/https_router.h"
#include "operator/server/https_server.h"

namespace tessel::server {

HttpsResponse handle_validate(const HttpsRequest& request);
HttpsResponse handle_mutate(const HttpsRequest& request);

// Adds POST /validate and POST /mutate.
void add_webhook_routes(HttpsRouter& router);

}  // namespace tessel::server
