// The patch formats of PATCH requests: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and
// Kubernetes' strategic merge patch for the built-in kinds tessel and kubectl use.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tessel::testing {

// A patch document that is not well formed (400 BadRequest).
class PatchFormatError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};
// A well-formed patch that cannot be applied to this object: a failed `test`, a missing path
// (422 in kube-apiserver).
class PatchApplyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// RFC 7386: objects merge recursively, null removes, anything else (lists too) replaces.
nlohmann::json merge_patch(const nlohmann::json& target, const nlohmann::json& patch);

// RFC 6902: add, remove, replace, move, copy, test, applied in order, all or nothing.
nlohmann::json json_patch(const nlohmann::json& target, const nlohmann::json& operations);

// Strategic merge patch of an object of `kind` (a core/v1 Pod, Node, Service, ...): as a merge
// patch, except that lists with a patch merge key (containers and env by name, container
// ports by containerPort, conditions and node addresses by type, ...) merge element by element,
// metadata.finalizers merges as a set, and the directives $patch (replace, delete, merge),
// $deleteFromPrimitiveList/<field> and $setElementOrder/<field> are honoured. $retainKeys is
// refused with PatchFormatError.
nlohmann::json strategic_merge_patch(const std::string& kind, const nlohmann::json& target,
                                     const nlohmann::json& patch);

}  // namespace tessel::testing
