// The documents kubectl and clients read before they touch resources: /version, discovery
// (/api, /apis, /apis/<group>, /api/v1, /apis/<group>/<version>) and OpenAPI v3, generated
// from what the server serves as a v1.26 kube-apiserver words them
// (fixtures/kube-1.26/discovery, openapi-minimal).
//
// Only what the server serves is listed (its ApiResource entries, api_builtin_resources.h: a
// real server lists many more groups and subresources such as pods/log; listing them here would
// promise endpoints this server lacks).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/api_builtin_resources.h"

namespace tessel::testing {

// /version: {"major":"1","minor":"26","gitVersion":"v1.26.4",...}. Throws
// std::invalid_argument when git_version is not of the form v<major>.<minor>[.<patch>...].
nlohmann::json version_document(const std::string& git_version);

// /api. The serverAddressByClientCIDRs entry names server_address ("127.0.0.1:6443"); the
// overload without it leaves that list out (clients do not read it).
nlohmann::json core_api_versions();
nlohmann::json core_api_versions(const std::string& server_address);

// /apis: every served group but the core one, kube-apiserver's built-in groups in its order,
// then the others by name, each with its versions by Kubernetes version priority (v1 before
// v1beta1 before v1alpha1) and the first as preferredVersion.
nlohmann::json api_group_list(const std::vector<ApiResource>& served);
// /apis/<group> (an APIGroup); null when the group is not served.
nlohmann::json api_group(const std::vector<ApiResource>& served, const std::string& group);

// /api/v1 and /apis/<group>/<version>; null when nothing of that group/version is served. Each
// resource is listed as its ApiResource says (resource_list_entries), sorted by name.
nlohmann::json api_resource_list(const std::vector<ApiResource>& served, const std::string& group,
                                 const std::string& version);

// /openapi/v3 (the index, each entry's serverRelativeURL carrying the document's hash) and
// /openapi/v3/<api/v1 | apis/<group>/<version>> (path without the query). A CRD's group-version
// gets the document kube-apiserver generates for it (paths, operations, the schema with
// apiVersion/kind/metadata, the List kind, the meta.k8s.io schemas), enough for kubectl's
// apply, create and explain. A built-in group-version gets every served resource's PATCH
// operation with x-kubernetes-group-version-kind and the fieldValidation parameter (the
// minimal document kubectl's apply needs; kubectl explain of built-in kinds is not supported).
// null for anything else, /openapi/v2 included (kubectl then falls back on v3 or, with
// --validate=false, needs none).
nlohmann::json openapi_document(const std::vector<ApiResource>& served,
                                const std::vector<nlohmann::json>& crds, const std::string& path);

}  // namespace tessel::testing
