// CustomResourceDefinitions a Kubernetes API test server serves from the start
// (ApiTestServerOptions::crd_directory), created as if applied through the API.
#pragma once

#include <string>

#include "tests/support/api_resources.h"
#include "tests/support/api_verbs.h"

namespace tessel::testing {

// Creates every CRD of every *.yaml, *.yml and *.json file in `directory` (in file name order;
// a file may hold several YAML documents). Throws std::invalid_argument naming the file and
// document of anything that is not a valid apiextensions.k8s.io/v1 CustomResourceDefinition,
// or the directory when it cannot be read.
void load_crds(const std::string& directory, ApiVerbs& verbs, const ServedResources& resources);

}  // namespace tessel::testing
