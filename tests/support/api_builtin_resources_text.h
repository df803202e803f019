// The discovery documents of a real kube-apiserver v1.26 that the test server's built-in
// resources are read from (api_builtin_resources_text.cpp is generated from the captured ones by
// api_builtin_resources_gen.py).
#pragma once

#include <nlohmann/json.hpp>

namespace tessel::testing {

// The APIResourceList bodies of /api/v1, /apis/apps/v1, /apis/apiextensions.k8s.io/v1,
// /apis/coordination.k8s.io/v1 and /apis/events.k8s.io/v1, as captured (every resource the real
// server listed, served here or not).
const nlohmann::json& captured_resource_lists();

}  // namespace tessel::testing
