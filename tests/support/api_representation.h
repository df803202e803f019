// The alternative representations kube-apiserver serves for GET, LIST and WATCH when the
// Accept header asks for them: meta.k8s.io Table (kubectl get) and PartialObjectMetadata
// (metadata-only clients).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/api_list.h"
#include "tests/support/api_resources.h"

namespace tessel::testing {

// api_version: "meta.k8s.io/v1" or "meta.k8s.io/v1beta1"; include_object: "None", "Metadata"
// or "Object" ("" means Metadata).
nlohmann::json table_of_list(const ResourceType& type, const ListResult& list,
                             const std::string& include_object, const std::string& api_version);
nlohmann::json table_of_one(const ResourceType& type, const nlohmann::json& object,
                            const std::string& include_object, const std::string& api_version);

nlohmann::json partial_object_metadata(const nlohmann::json& object,
                                       const std::string& api_version);
nlohmann::json partial_object_metadata_list(const ListResult& list, const std::string& api_version);

}  // namespace tessel::testing
