// docs/api.md documents every spec field of both CRDs: a field added to crds/ without a line
// in the document fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/crds.h"

namespace tessel::api {
namespace {

using nlohmann::json;

void collect(const json& schema, const std::string& path, std::vector<std::string>& out) {
  if (!schema.contains("properties")) return;
  for (const auto& [name, child] : schema["properties"].items()) {
    const std::string here = path + "." + name;
    out.push_back(here);
    collect(child, here, out);
    if (child.contains("items")) collect(child["items"], here + "[]", out);
  }
}

std::vector<std::string> spec_fields(const json& crd) {
  std::vector<std::string> fields;
  const json& schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
  collect(schema["properties"]["spec"], "spec", fields);
  return fields;
}

TEST(ApiDoc, EverySpecFieldIsDocumented) {
  std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/docs/api.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  ASSERT_FALSE(doc.empty());
  size_t checked = 0;
  for (const json* crd : {&trainingjob_crd(), &membercluster_crd()}) {
    for (const std::string& field : spec_fields(*crd)) {
      EXPECT_NE(doc.find("`" + field + "`"), std::string::npos)
          << field << " is not in docs/api.md";
      ++checked;
    }
  }
  EXPECT_GT(checked, 90u);
}

}  // namespace
}  // namespace tessel::api
