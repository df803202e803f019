// The diff kube-apiserver v1.26 appends to "pod updates may not change fields other than ...":
// github.com/google/go-cmp's cmp.Diff of the old and the new internal core.PodSpec, in its
// report format (struct and list records, "-"/"+" lines, "... // N identical fields").
//
// The internal types' field names and order are reproduced for the Pod spec, containers,
// ports, environment variables, volume mounts, resources, tolerations and the pod security
// context; other nested objects are printed with their JSON field names capitalised. go-cmp
// itself varies its output a little between processes (it picks between two kinds of spaces at
// random); this renders the plain-space variant.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel::testing {

// Both specs as the v1 JSON of the stored Pods (defaults applied).
std::string pod_spec_diff(const nlohmann::json& old_spec, const nlohmann::json& new_spec);

}  // namespace tessel::testing
