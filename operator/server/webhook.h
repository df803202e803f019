// The admission webhook's HTTP face: POST /validate with an AdmissionReview (JSON) is answered
// with review_admission's AdmissionReview; anything else gets the status code that says why.
#pragma once

#include "operator/server/https_server.h"

namespace tessel::server {

HttpsResponse handle_webhook(const HttpsRequest& request);

}  // namespace tessel::server
