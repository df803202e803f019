// The kinds admission webhooks are configured with, as kube-apiserver v1.26 serves them:
// admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration and
// MutatingWebhookConfiguration (defaults and validation of pkg/apis/admissionregistration), and
// core/v1 Endpoints, through which a webhook's clientConfig.service is reached (served as
// api_builtin_resources.h lists them). Their rules plug into builtin_semantics' kind table.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "tests/support/builtin_semantics_kinds.h"

namespace tessel::testing {

KindRules validating_webhook_configuration_rules();
KindRules mutating_webhook_configuration_rules();
KindRules endpoints_rules();

// Validation of one LabelSelector object (matchLabels, matchExpressions) at `field`, worded as
// apimachinery's ValidateLabelSelector.
std::vector<FieldError> validate_label_selector(const nlohmann::json& selector,
                                                const std::string& field);

}  // namespace tessel::testing
