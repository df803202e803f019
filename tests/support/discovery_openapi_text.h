// The resource-independent texts of the OpenAPI documents kube-apiserver v1.26 generates for
// custom resources (discovery_openapi_text.cpp is generated from the captured document).
#pragma once

#include <nlohmann/json.hpp>

namespace tessel::testing {

// components.schemas entries of meta.k8s.io: ObjectMeta, ListMeta, Status, DeleteOptions, ...
const nlohmann::json& openapi_meta_schemas();
// The standard parameters by name (dryRun, fieldManager, fieldValidation, limit, namespace,
// pretty, ...), each a complete OpenAPI parameter object.
const nlohmann::json& openapi_parameters();
// Descriptions of apiVersion, kind, objectMetadata and listMetadata.
const nlohmann::json& openapi_field_descriptions();

}  // namespace tessel::testing
