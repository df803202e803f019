// A set of field paths as structured-merge-diff keeps them for one manager, with the FieldsV1
// form metadata.managedFields stores: {"f:spec": {".": {}, "f:replicas": {}}}.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::testing {

// One step of a path, in its FieldsV1 spelling: "f:replicas" (a field), "k:{\"name\":\"c\"}"
// (the element of a list keyed by fields), "v:\"x\"" (the element of a set), "i:3" (an index).
using PathElement = std::string;
using FieldPath = std::vector<PathElement>;

// structured-merge-diff's order of path elements: fields, keys, values, then indexes.
struct PathElementOrder {
  bool operator()(const PathElement& a, const PathElement& b) const;
};

// ".spec.containers[name=\"stage\"].args", as kube-apiserver names a field in conflicts.
std::string path_string(const FieldPath& path);

class FieldSet {
 public:
  // Throws std::invalid_argument naming the offending key when `fields` is not FieldsV1.
  static FieldSet from_fields_v1(const nlohmann::json& fields);
  nlohmann::json to_fields_v1() const;

  void insert(const FieldPath& path);
  bool has(const FieldPath& path) const;
  // Whether `path` or anything below it is a member.
  bool has_at_or_below(const FieldPath& path) const;
  bool empty() const;

  FieldSet union_with(const FieldSet& other) const;
  FieldSet difference(const FieldSet& other) const;  // members of this that other lacks
  FieldSet intersection(const FieldSet& other) const;
  // Without the members of other and everything below them.
  FieldSet recursive_difference(const FieldSet& other) const;

  // Every member, each level's members before the levels below it (structured-merge-diff's
  // iteration order).
  std::vector<FieldPath> paths() const;

  friend bool operator==(const FieldSet& a, const FieldSet& b) { return a.root_ == b.root_; }

 private:
  struct Node {
    bool member = false;
    std::map<PathElement, Node, PathElementOrder> children;
    bool operator==(const Node&) const = default;
  };
  static void read(const nlohmann::json& fields, Node& node, const std::string& where);
  static nlohmann::json write(const Node& node);
  static bool any_member(const Node& node);
  static void collect(const Node& node, FieldPath& prefix, std::vector<FieldPath>& out);

  Node root_;
};

}  // namespace tessel::testing
