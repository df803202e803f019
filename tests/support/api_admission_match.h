// Which admission webhooks a request goes to, as kube-apiserver's webhook plugins decide
// (k8s.io/apiserver/pkg/admission/plugin/webhook/predicates): the webhook's rules
// (operations, apiGroups, apiVersions, resources with "*", "*/*" and subresources, scope), its
// namespaceSelector and its objectSelector.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel::testing {

struct AdmissionTarget {
  std::string group;
  std::string version;
  std::string resource;  // plural
  std::string subresource;
  std::string operation;   // CREATE, UPDATE, DELETE
  std::string namespace_;  // for a Namespace itself: its own name; "" when cluster-scoped
};

// Whether one of the webhook's rules names this request.
bool rules_match(const nlohmann::json& webhook, const AdmissionTarget& target);

// Whether labels (metadata.labels, an object or null) satisfy a LabelSelector object
// (matchLabels and matchExpressions; an empty selector matches everything).
bool label_selector_matches(const nlohmann::json& selector, const nlohmann::json& labels);

// An empty (or absent) selector.
bool selects_everything(const nlohmann::json& selector);

}  // namespace tessel::testing
