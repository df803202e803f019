#include "tests/support/structural_schema.h"

#include <stdexcept>

#include "tests/support/structural_schema_node.h"

namespace tessel::testing {

StructuralSchema::StructuralSchema(const nlohmann::json& open_api_v3_schema)
    : root_(parse_schema_node(open_api_v3_schema, "openAPIV3Schema")) {
  if (!root_->has_type("object")) {
    const std::string type = root_->types.empty() ? "" : root_->types.front();
    throw std::invalid_argument("openAPIV3Schema.type: Invalid value: \"" + type +
                                "\": must be object at the root");
  }
}

}  // namespace tessel::testing
