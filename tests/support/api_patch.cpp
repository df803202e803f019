#include "tests/support/api_patch.h"

namespace tessel::testing {

using nlohmann::json;

json merge_patch(const json& target, const json& patch) {
  json result = target;
  result.merge_patch(patch);
  return result;
}

json json_patch(const json& target, const json& operations) {
  if (!operations.is_array()) {
    throw PatchFormatError("json: cannot unmarshal " +
                           std::string(operations.is_object() ? "object" : operations.type_name()) +
                           " into Go value of type jsonpatch.Patch");
  }
  for (const json& operation : operations) {
    if (!operation.is_object() || !operation.contains("op") || !operation["op"].is_string() ||
        !operation.contains("path") || !operation["path"].is_string()) {
      throw PatchFormatError("invalid JSON patch operation: " + operation.dump());
    }
    const std::string op = operation["op"].get<std::string>();
    if (op != "add" && op != "remove" && op != "replace" && op != "move" && op != "copy" &&
        op != "test") {
      throw PatchFormatError("Unexpected kind: " + op);
    }
  }
  try {
    return target.patch(operations);
  } catch (const json::parse_error& error) {
    throw PatchFormatError(error.what());
  } catch (const json::exception& error) {
    throw PatchApplyError(error.what());
  }
}

}  // namespace tessel::testing
