// How server-side apply and managedFields treat each list and map of a kind: the element
// relationships of structured-merge-diff (atomic, set, map keyed by fields), which fields the
// write of a subresource ignores, and the zero-valued object a create is compared against.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::testing {

// A path pattern names a field by its field names from the root joined by '.', "[]" for a
// list element and "*" for any key of a map: "spec.containers[].ports", "metadata.labels".
class MergeTypes {
 public:
  enum class ListType { kAtomic, kSet, kMap };
  struct ListRule {
    ListType type = ListType::kAtomic;
    std::vector<std::string> keys;  // kMap only, in declaration order
    // Values structured-merge-diff assumes for key fields an element leaves out
    // ("protocol": "TCP" for container ports).
    nlohmann::json key_defaults = nlohmann::json::object();
  };

  // A built-in kind tessel uses (Pod, Node, Namespace, Service, ConfigMap, Secret, Event,
  // ServiceAccount, Lease, CustomResourceDefinition) with the list types of kube-apiserver's
  // OpenAPI; any other kind gets custom_resource_defaults().
  static MergeTypes for_kind(const std::string& api_version, const std::string& kind);
  // A custom resource whose schema is not known: every list atomic, every map granular, and a
  // status subresource (so status is ignored by main-resource writes and spec by /status).
  static MergeTypes custom_resource_defaults();
  // One version of a CustomResourceDefinition (an element of spec.versions): list types from
  // x-kubernetes-list-type / x-kubernetes-list-map-keys, atomic objects from
  // x-kubernetes-map-type, and the status subresource when the version has one. Lists without
  // x-kubernetes-list-type are atomic, as in kube-apiserver.
  static MergeTypes for_crd_version(const nlohmann::json& crd_version);

  // The rule for the list at `pattern`; atomic when none was declared.
  const ListRule& list_rule(const std::string& pattern) const;
  // Whether the object (map or struct) at `pattern` is replaced as a whole.
  bool atomic_map(const std::string& pattern) const;
  // Top-level paths ("status", "spec", "metadata.ownerReferences") that a write through
  // `subresource` ("" for the main resource) resets, so nobody gets to own them by it.
  const std::vector<std::vector<std::string>>& ignored_fields(const std::string& subresource) const;
  // What kube-apiserver compares a create against: the kind's zero value as its Go type
  // serialises it (`{"metadata":{"creationTimestamp":null},"spec":{"containers":null},
  // "status":{}}` for a Pod), with apiVersion and kind.
  nlohmann::json empty_object(const std::string& api_version, const std::string& kind) const;

  void set_list(const std::string& pattern, ListRule rule);
  void set_atomic_map(const std::string& pattern);
  void set_ignored(const std::string& subresource, std::vector<std::vector<std::string>> paths);
  void set_zero_value(nlohmann::json zero);

 private:
  std::map<std::string, ListRule> lists_;
  std::vector<std::string> atomic_maps_;
  std::map<std::string, std::vector<std::vector<std::string>>> ignored_;
  nlohmann::json zero_ = nlohmann::json::object();
};

}  // namespace tessel::testing
