#include "api/crds.h"

#include "api/crd_text.h"
#include "api/yaml_json.h"

namespace tessel::api {
namespace {

using nlohmann::json;

const json& version_schema(const json& crd) {
  for (const json& version : crd.at("spec").at("versions")) {
    if (version.at("name") == "v1alpha1") return version.at("schema").at("openAPIV3Schema");
  }
  throw std::logic_error(crd.at("metadata").at("name").get<std::string>() + ": no v1alpha1");
}

}  // namespace

const json& trainingjob_crd() {
  static const json crd = yaml_to_json(trainingjob_crd_text(), "crds/tessel.dev_trainingjobs.yaml");
  return crd;
}

const json& membercluster_crd() {
  static const json crd =
      yaml_to_json(membercluster_crd_text(), "crds/tessel.dev_memberclusters.yaml");
  return crd;
}

const OpenApiSchema& trainingjob_schema() {
  static const OpenApiSchema schema(version_schema(trainingjob_crd()));
  return schema;
}

const OpenApiSchema& membercluster_schema() {
  static const OpenApiSchema schema(version_schema(membercluster_crd()));
  return schema;
}

}  // namespace tessel::api
