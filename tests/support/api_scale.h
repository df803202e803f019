// The scale subresource of Deployments (`kubectl scale`), an autoscaling/v1 Scale: GET shows the
// Deployment's spec.replicas, status.replicas and its selector; PUT (a Scale) and PATCH (merge,
// JSON or strategic merge patch of the Scale) set spec.replicas by a merge patch of the
// Deployment through the verbs, with the request's options, so admission, generation and
// resourceVersion behave as for any write. (managedFields then record the write against the
// main resource rather than the scale subresource.)
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/api_verbs.h"

namespace tessel::testing {

// GET .../scale, PUT and PATCH: the answer body and status. `ref` names the object and its
// subresource "scale"; `media_type` is the patch's. ApiError as the verbs throw, 415 for a
// server-side apply of a Scale.
VerbResult serve_scale(ApiVerbs& verbs, const ObjectRef& ref, const std::string& method,
                       const std::string& media_type, const std::string& body,
                       const WriteOptions& options);

}  // namespace tessel::testing
