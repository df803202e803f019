// The CRDs of crds/ as this library reads them: their schemas, names and printer columns.
#pragma once

#include <nlohmann/json.hpp>

#include "api/openapi_schema.h"

namespace tessel::api {

// The whole CustomResourceDefinition manifests, as JSON.
const nlohmann::json& trainingjob_crd();
const nlohmann::json& membercluster_crd();
// Their v1alpha1 openAPIV3Schemas, ready to default and validate objects.
const OpenApiSchema& trainingjob_schema();
const OpenApiSchema& membercluster_schema();

}  // namespace tessel::api
