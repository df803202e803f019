// StructuralSchema::prune and apply_defaults: the apiextensions server's structural pruning
// (pruning.PruneWithOptions, then PruneNonNullableNullsWithoutDefaults) and defaulting
// (structuraldefaulting.Default). The root's apiVersion, kind and metadata are the server
// core's business and are left alone.
#include <algorithm>
#include <set>

#include "tests/support/structural_schema.h"
#include "tests/support/structural_schema_node.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

bool is_root_meta_field(const std::string& key) {
  return key == "apiVersion" || key == "kind" || key == "metadata";
}

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string index_path(const std::string& parent, std::size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

class Pruner {
 public:
  explicit Pruner(std::vector<std::string>& removed) : removed_(removed) {}

  // node may be null: a value with no schema at all (below additionalProperties: true), whose
  // object fields are all unknown.
  void prune(json& value, const SchemaNode* node, const std::string& path, bool root) {
    if (node != nullptr && node->preserve_unknown_fields) {
      skip_prune(value, node, path, root);
      return;
    }
    if (value.is_object()) {
      std::vector<std::string> unknown;
      for (auto& [key, child] : value.items()) {
        if (root && is_root_meta_field(key)) continue;
        if (node != nullptr && node->embedded_resource && is_embedded_meta_field(key, child)) {
          continue;
        }
        const SchemaNode* child_node = node == nullptr ? nullptr : property_schema(*node, key);
        if (child_node != nullptr || (node != nullptr && node->additional_properties_any)) {
          prune(child, child_node, child_path(path, key), false);
        } else {
          unknown.push_back(key);
        }
      }
      for (const auto& key : unknown) {
        removed_.push_back(child_path(path, key));
        value.erase(key);
      }
    } else if (value.is_array()) {
      const SchemaNode* items = node == nullptr ? nullptr : node->items.get();
      for (std::size_t i = 0; i < value.size(); ++i) {
        prune(value[i], items, index_path(path, i), false);
      }
    }
  }

 private:
  // The schema of an object's field: its property, else additionalProperties' schema.
  static const SchemaNode* property_schema(const SchemaNode& node, const std::string& key) {
    const auto property = node.properties.find(key);
    if (property != node.properties.end()) return property->second.get();
    return node.additional_properties.get();
  }

  // An embedded resource keeps its apiVersion and kind strings and its metadata object.
  static bool is_embedded_meta_field(const std::string& key, const json& value) {
    if (key == "apiVersion" || key == "kind") return value.is_string();
    return key == "metadata" && value.is_object();
  }

  // Below x-kubernetes-preserve-unknown-fields unknown fields stay; known ones are pruned
  // inside.
  void skip_prune(json& value, const SchemaNode* node, const std::string& path, bool root) {
    if (value.is_object()) {
      for (auto& [key, child] : value.items()) {
        if ((root || node->embedded_resource) && is_root_meta_field(key)) continue;
        const SchemaNode* child_node = property_schema(*node, key);
        if (child_node != nullptr || node->additional_properties_any) {
          prune(child, child_node, child_path(path, key), false);
        }
      }
    } else if (value.is_array() && node->items) {
      for (std::size_t i = 0; i < value.size(); ++i) {
        skip_prune(value[i], node->items.get(), index_path(path, i), false);
      }
    }
  }

  std::vector<std::string>& removed_;
};

bool non_nullable_null(const json& value, const SchemaNode* node) {
  return value.is_null() && node != nullptr && !node->nullable;
}

// Removes nulls the schema neither allows nor defaults.
void prune_nulls(json& value, const SchemaNode& node, bool root) {
  if (value.is_object()) {
    std::vector<std::string> dropped;
    for (auto& [key, child] : value.items()) {
      if (root && is_root_meta_field(key)) continue;
      const auto property = node.properties.find(key);
      const SchemaNode* child_node = property != node.properties.end()
                                         ? property->second.get()
                                         : node.additional_properties.get();
      if (child_node == nullptr) continue;
      if (non_nullable_null(child, child_node) && !child_node->default_value) {
        dropped.push_back(key);
      } else {
        prune_nulls(child, *child_node, false);
      }
    }
    for (const auto& key : dropped) value.erase(key);
  } else if (value.is_array() && node.items) {
    for (auto& item : value) prune_nulls(item, *node.items, false);
  }
}

void apply_defaults_to(json& value, const SchemaNode& node, bool root) {
  if (value.is_object()) {
    for (const auto& [key, property] : node.properties) {
      if (!property->default_value || (root && is_root_meta_field(key))) continue;
      const auto present = value.find(key);
      if (present == value.end() || non_nullable_null(*present, property.get())) {
        value[key] = *property->default_value;
      }
    }
    for (auto& [key, child] : value.items()) {
      if (root && is_root_meta_field(key)) continue;
      const auto property = node.properties.find(key);
      if (property != node.properties.end()) {
        apply_defaults_to(child, *property->second, false);
      } else if (node.additional_properties) {
        // As upstream: a defaulted null is not defaulted further inside.
        if (non_nullable_null(child, node.additional_properties.get())) {
          if (node.additional_properties->default_value) {
            child = *node.additional_properties->default_value;
          }
        } else {
          apply_defaults_to(child, *node.additional_properties, false);
        }
      }
    }
  } else if (value.is_array() && node.items) {
    for (auto& item : value) {
      if (non_nullable_null(item, node.items.get())) {
        if (node.items->default_value) item = *node.items->default_value;
      } else {
        apply_defaults_to(item, *node.items, false);
      }
    }
  }
}

}  // namespace

std::vector<std::string> StructuralSchema::prune(json& object) const {
  std::vector<std::string> removed;
  Pruner(removed).prune(object, root_.get(), "", true);
  prune_nulls(object, *root_, true);
  std::sort(removed.begin(), removed.end());
  return removed;
}

void StructuralSchema::apply_defaults(json& object) const {
  apply_defaults_to(object, *root_, true);
}

}  // namespace tessel::testing
