// The admission webhooks' decisions, as pure functions of the AdmissionReview (admission.k8s.io/v1)
// kube-apiserver sends. Validation: TrainingJobs are checked by api/'s one parser (the CRD's schema
// again, the rules across fields, and on update the fields that may not change while pods run);
// MemberClusters by their CRD's schema. A refusal lists every field at fault, so that
// `kubectl apply` of a bad job fails at once naming the fields. The HTTPS server around it is
// the operator's; the operator checks the same rules again in reconcile, in case the webhook
// was bypassed. Defaulting: a JSON Patch that adds what api/'s defaulting fills in.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace tessel::server {

// A request that is not an AdmissionReview v1 with a request (the server answers 400).
class AdmissionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The AdmissionReview to answer with: the same apiVersion and kind, response.uid the request's,
// allowed, and on refusal status {code: 422, reason: Invalid, message}. Deletions, subresource
// writes (status) and kinds other than tessel.dev's are allowed. Throws AdmissionError.
nlohmann::json review_admission(const nlohmann::json& review);

// The defaulting webhook's AdmissionReview: allowed, and when the object lacks fields that api/
// defaults (the CRD's structural defaults, which kube-apiserver applies too), patchType
// JSONPatch with patch = base64 of the RFC 6902 operations that add them; no patch when nothing
// is missing. TrainingJobs and MemberClusters are defaulted; deletions, subresource writes and
// other kinds are allowed as they are. An invalid object is defaulted as far as it can be and
// left to the validating webhook to refuse. Throws AdmissionError.
nlohmann::json review_defaulting(const nlohmann::json& review);

}  // namespace tessel::server
