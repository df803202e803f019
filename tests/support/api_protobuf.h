// Request bodies in Kubernetes' protobuf encoding ("application/vnd.kubernetes.protobuf": the
// "k8s\0" magic, then a runtime.Unknown carrying apiVersion, kind and the object's bytes), which
// kubectl's typed clients send: `kubectl create namespace`, `kubectl create serviceaccount`,
// `kubectl create token`, `kubectl create role|clusterrole|rolebinding|clusterrolebinding` and
// `kubectl auth can-i [--list]`. Decoded into the JSON form the server works on, for the kinds
// those commands send: v1 Namespace and ServiceAccount, authentication.k8s.io/v1 TokenRequest,
// rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding, ClusterRoleBinding and
// authorization.k8s.io/v1 SelfSubjectAccessReview and SelfSubjectRulesReview (the fields of
// k8s.io/api's generated.proto). Answers stay JSON, which those clients accept.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel::testing {

inline constexpr const char* kProtobufMediaType = "application/vnd.kubernetes.protobuf";

// Throws ApiError 400 naming what is wrong: a body without the magic or that does not parse,
// or a kind not listed above (send it as JSON).
nlohmann::json decode_protobuf_body(const std::string& body);

}  // namespace tessel::testing
