// The CRD manifests of crds/, compiled in (api/CMakeLists.txt generates the definitions).
#pragma once

namespace tessel::api {

const char* trainingjob_crd_text();
const char* membercluster_crd_text();

}  // namespace tessel::api
