// Admission webhooks, called as kube-apiserver v1.26 calls them
// (k8s.io/apiserver/pkg/admission/plugin/webhook): every MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration stored in the test server is read on each request; the
// webhooks whose rules and selectors match get an AdmissionReview v1 over HTTPS (clientConfig.url,
// or clientConfig.service routed to the Service's Endpoints as --enable-aggregator-routing
// does). Mutating webhooks run one after another in the order of their configurations' names
// and their JSONPatch responses are applied; validating webhooks run concurrently and the first
// failure is answered. A denial is the Status the webhook returned, prefixed
// `admission webhook "<name>" denied the request: ` (code < 400 becomes 400); a call that fails
// (timeout, refused, bad certificate, bad response) is an InternalError
// `failed calling webhook "<name>": ...` under failurePolicy Fail and is skipped under Ignore.
// Warnings in responses come back as Warning headers. The configurations themselves are never
// sent to webhooks (as kube-apiserver exempts them). A mutating webhook with reinvocationPolicy
// IfNeeded is called a second time when a later one changed the object. matchPolicy Equivalent
// matches as Exact: each resource is served in one version. Built-in controllers' writes (garbage
// collector, namespace and CRD finalizers) do not go through webhooks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/api_resources.h"
#include "tests/support/api_store.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {

// What a webhook is told about the request (AdmissionReview's request, less the objects).
struct AdmissionRequest {
  const ResourceType* type = nullptr;
  std::string subresource;
  std::string operation;   // CREATE, UPDATE, DELETE
  std::string namespace_;  // for a Namespace itself: its own name
  std::string name;
  UserInfo user;
  bool dry_run = false;
  nlohmann::json options;  // the CreateOptions, UpdateOptions or DeleteOptions
};

class WebhookAdmission {
 public:
  explicit WebhookAdmission(const ObjectStore& store);

  // Runs the matching mutating webhooks on `object` (null on DELETE), applying their patches.
  // Throws ApiError for a denial, a failed call under failurePolicy Fail, or a patch that does
  // not apply. Warnings are appended.
  void mutate(const AdmissionRequest& request, nlohmann::json& object,
              const nlohmann::json& old_object, std::vector<std::string>& warnings) const;
  // Runs the matching validating webhooks; throws as mutate() does.
  void validate(const AdmissionRequest& request, const nlohmann::json& object,
                const nlohmann::json& old_object, std::vector<std::string>& warnings) const;

 private:
  std::vector<nlohmann::json> matching(const std::string& resource, const AdmissionRequest& request,
                                       const nlohmann::json& object,
                                       const nlohmann::json& old_object) const;
  bool namespace_matches(const nlohmann::json& webhook, const AdmissionRequest& request,
                         const nlohmann::json& object, const nlohmann::json& old_object) const;

  const ObjectStore& store_;
};

}  // namespace tessel::testing
