#include "tests/support/api_access_review.h"

#include "tests/support/api_errors.h"
#include "tests/support/builtin_semantics_errors.h"

namespace tessel::testing {

using json = nlohmann::json;

json answer_self_subject_access_review(const json& body, const UserInfo& user,
                                       const Authorizer& authorizer) {
  if (!body.is_object() || body.value("kind", "") != "SelfSubjectAccessReview" ||
      body.value("apiVersion", "") != "authorization.k8s.io/v1") {
    throw bad_request("the body must be an authorization.k8s.io/v1 SelfSubjectAccessReview");
  }
  const json spec = body.value("spec", json::object());
  const json resource = spec.value("resourceAttributes", json());
  const json non_resource = spec.value("nonResourceAttributes", json());
  if (resource.is_object() == non_resource.is_object()) {
    throw invalid(
        "SelfSubjectAccessReview", "authorization.k8s.io", "",
        {resource.is_object()
             ? validation::invalid("spec.nonResourceAttributes", non_resource,
                                   "cannot be specified in combination with resourceAttributes")
             : validation::invalid("spec.resourceAttributes", nullptr,
                                   "exactly one of nonResourceAttributes or resourceAttributes "
                                   "must be specified")});
  }
  RequestAttributes attributes;
  attributes.user = user;
  if (resource.is_object()) {
    attributes.verb = resource.value("verb", "");
    attributes.api_group = resource.value("group", "");
    attributes.resource = resource.value("resource", "");
    attributes.subresource = resource.value("subresource", "");
    attributes.namespace_ = resource.value("namespace", "");
    attributes.name = resource.value("name", "");
  } else {
    attributes.resource_request = false;
    attributes.verb = non_resource.value("verb", "");
    attributes.path = non_resource.value("path", "");
  }
  json answer = body;
  answer["metadata"] = {{"creationTimestamp", nullptr}};
  answer["status"] = {{"allowed", authorizer(attributes)}};
  return answer;
}

}  // namespace tessel::testing
