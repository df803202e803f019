#include "tests/support/managed_fields_walk.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tessel::testing {
namespace {

using json = nlohmann::json;

std::string field_pattern(const std::string& pattern, const std::string& field) {
  return pattern.empty() ? field : pattern + "." + field;
}

std::string item_pattern(const std::string& pattern) { return pattern + "[]"; }

// The path element of every element of a set or keyed list, or nullopt when the list cannot
// be treated element by element (an element without its key, a duplicate, an object in a set):
// such a list is then handled as atomic, as kube-apiserver's field manager gives up on it.
std::optional<std::vector<PathElement>> element_keys(const json& list,
                                                     const MergeTypes::ListRule& rule) {
  if (rule.type == MergeTypes::ListType::kAtomic || !list.is_array()) return std::nullopt;
  std::vector<PathElement> out;
  std::set<PathElement> seen;
  for (const auto& item : list) {
    PathElement element;
    if (rule.type == MergeTypes::ListType::kSet) {
      if (item.is_structured()) return std::nullopt;
      element = "v:" + item.dump();
    } else {
      if (!item.is_object()) return std::nullopt;
      json key = json::object();
      for (const auto& name : rule.keys) {
        if (item.contains(name)) {
          key[name] = item[name];
        } else if (rule.key_defaults.contains(name)) {
          key[name] = rule.key_defaults[name];
        } else {
          return std::nullopt;
        }
      }
      element = "k:" + key.dump();
    }
    if (!seen.insert(element).second) return std::nullopt;
    out.push_back(std::move(element));
  }
  return out;
}

bool empty_value(const json* v) {
  return v == nullptr || v->is_null() || (v->is_structured() && v->empty());
}

// ---- fields_of ----

void collect_fields(const json& value, FieldPath& path, const std::string& pattern,
                    const MergeTypes& types, FieldSet& out) {
  if (value.is_object()) {
    if (!path.empty() && types.atomic_map(pattern)) {
      out.insert(path);
      return;
    }
    for (const auto& [name, child] : value.items()) {
      path.push_back("f:" + name);
      collect_fields(child, path, field_pattern(pattern, name), types, out);
      path.pop_back();
    }
    return;
  }
  if (value.is_array()) {
    const auto keys = element_keys(value, types.list_rule(pattern));
    if (!keys) {
      out.insert(path);
      return;
    }
    for (std::size_t i = 0; i < value.size(); ++i) {
      path.push_back((*keys)[i]);
      collect_fields(value[i], path, item_pattern(pattern), types, out);
      out.insert(path);
      path.pop_back();
    }
    return;
  }
  out.insert(path);
}

// ---- compare ----

struct Comparer {
  const MergeTypes& types;
  Comparison& out;

  void leaf(const json* lhs, const json* rhs, const FieldPath& path) {
    if (lhs == nullptr) {
      out.added.insert(path);
    } else if (rhs == nullptr) {
      out.removed.insert(path);
    } else if (*lhs != *rhs) {
      out.modified.insert(path);
    }
  }

  void node(const json* lhs, const json* rhs, FieldPath& path, const std::string& pattern) {
    // A null stands for an empty map or list (a nil slice or map of a Go type): present, but
    // with nothing in it.
    const json* typed = lhs == nullptr || lhs->is_null() ? rhs : lhs;
    if (typed == nullptr || typed->is_null()) return leaf(lhs, rhs, path);
    const json& any = *typed;
    const auto same_shape = [&](const json* side) {
      return side == nullptr || side->is_null() || side->type() == any.type() ||
             (!side->is_structured() && !any.is_structured());
    };
    if (!same_shape(lhs) || !same_shape(rhs) || !any.is_structured()) {
      return leaf(lhs, rhs, path);
    }
    const bool both_empty = empty_value(lhs) && empty_value(rhs);
    if (any.is_object()) {
      if (both_empty || (!path.empty() && types.atomic_map(pattern))) return leaf(lhs, rhs, path);
      std::set<std::string> names;
      for (const json* side : {lhs, rhs}) {
        if (side == nullptr || !side->is_object()) continue;
        for (const auto& [name, v] : side->items()) names.insert(name);
      }
      for (const auto& name : names) {
        const json* l =
            lhs != nullptr && lhs->is_object() && lhs->contains(name) ? &(*lhs)[name] : nullptr;
        const json* r =
            rhs != nullptr && rhs->is_object() && rhs->contains(name) ? &(*rhs)[name] : nullptr;
        path.push_back("f:" + name);
        node(l, r, path, field_pattern(pattern, name));
        path.pop_back();
      }
    } else {
      const auto& rule = types.list_rule(pattern);
      const json empty = json::array();
      const json& lvalue = lhs != nullptr && lhs->is_array() ? *lhs : empty;
      const json& rvalue = rhs != nullptr && rhs->is_array() ? *rhs : empty;
      const auto lkeys = element_keys(lvalue, rule);
      const auto rkeys = element_keys(rvalue, rule);
      if (both_empty || !lkeys || !rkeys) return leaf(lhs, rhs, path);
      std::map<PathElement, const json*> litems;
      std::map<PathElement, const json*> ritems;
      for (std::size_t i = 0; i < lkeys->size(); ++i) litems[(*lkeys)[i]] = &lvalue[i];
      for (std::size_t i = 0; i < rkeys->size(); ++i) ritems[(*rkeys)[i]] = &rvalue[i];
      std::set<PathElement> elements;
      for (const auto& [e, v] : litems) elements.insert(e);
      for (const auto& [e, v] : ritems) elements.insert(e);
      for (const auto& e : elements) {
        path.push_back(e);
        node(litems.contains(e) ? litems[e] : nullptr, ritems.contains(e) ? ritems[e] : nullptr,
             path, item_pattern(pattern));
        path.pop_back();
      }
    }
    if (lhs == nullptr) {
      out.added.insert(path);
    } else if (rhs == nullptr) {
      out.removed.insert(path);
    }
  }
};

// ---- merge ----

json merge_node(const json& lhs, const json& rhs, const std::string& pattern,
                const MergeTypes& types, bool root);

// structured-merge-diff's element order: shared elements in the configuration's order, the
// live object's own elements where they were, the configuration's new ones where it has them.
json merge_list(const json& lhs, const json& rhs, const std::vector<PathElement>& lkeys,
                const std::vector<PathElement>& rkeys, const std::string& pattern,
                const MergeTypes& types) {
  std::map<PathElement, std::size_t> lindex;
  std::map<PathElement, std::size_t> rindex;
  for (std::size_t i = 0; i < lkeys.size(); ++i) lindex[lkeys[i]] = i;
  for (std::size_t i = 0; i < rkeys.size(); ++i) rindex[rkeys[i]] = i;
  // The shared elements in the configuration's order; next_shared is the one to place next.
  std::vector<PathElement> shared;
  for (const auto& k : rkeys) {
    if (lindex.contains(k)) shared.push_back(k);
  }
  std::size_t shared_taken = 0;
  const PathElement* next_shared = nullptr;
  auto advance = [&] {
    next_shared = shared_taken < shared.size() ? &shared[shared_taken++] : nullptr;
  };
  advance();
  const std::string items = item_pattern(pattern);
  auto merged_item = [&](const PathElement& k) {
    const json& r = rhs[rindex[k]];
    return lindex.contains(k) ? merge_node(lhs[lindex[k]], r, items, types, false) : r;
  };
  json out = json::array();
  std::set<PathElement> merged;
  std::size_t li = 0;
  std::size_t ri = 0;
  while (li < lkeys.size() || ri < rkeys.size()) {
    if (li < lkeys.size() && ri < rkeys.size()) {
      if (lkeys[li] == rkeys[ri]) {
        merged.insert(rkeys[ri]);
        out.push_back(merged_item(rkeys[ri]));
        ++li;
        ++ri;
        advance();
        continue;
      }
      if (rindex.contains(lkeys[li]) && next_shared != nullptr && *next_shared != lkeys[li]) {
        ++li;
        continue;
      }
    }
    if (li < lkeys.size()) {
      if (!rindex.contains(lkeys[li])) {
        out.push_back(lhs[li]);
        ++li;
        continue;
      }
      if (merged.contains(lkeys[li])) {
        ++li;
        continue;
      }
    }
    if (ri < rkeys.size()) {
      const PathElement k = rkeys[ri];
      merged.insert(k);
      out.push_back(merged_item(k));
      ++ri;
      if (next_shared != nullptr && *next_shared == k) advance();
    }
  }
  return out;
}

json merge_node(const json& lhs, const json& rhs, const std::string& pattern,
                const MergeTypes& types, bool root) {
  if (lhs.is_object() && rhs.is_object() && (root || !types.atomic_map(pattern))) {
    json out = lhs;
    for (const auto& [name, value] : rhs.items()) {
      out[name] = lhs.contains(name)
                      ? merge_node(lhs[name], value, field_pattern(pattern, name), types, false)
                      : value;
    }
    return out;
  }
  if (lhs.is_array() && rhs.is_array()) {
    const auto& rule = types.list_rule(pattern);
    const auto lkeys = element_keys(lhs, rule);
    const auto rkeys = element_keys(rhs, rule);
    if (lkeys && rkeys) return merge_list(lhs, rhs, *lkeys, *rkeys, pattern, types);
  }
  return rhs;
}

// ---- remove ----

void remove_below(json& value, const FieldSet& fields, FieldPath& path, const std::string& pattern,
                  const MergeTypes& types) {
  auto visit = [&](json& child, const std::string& child_pattern) -> bool {
    // Returns whether the child is to be dropped.
    if (fields.has(path)) return true;
    if (!fields.has_at_or_below(path)) return false;
    const bool was_empty = child.is_structured() && child.empty();
    remove_below(child, fields, path, child_pattern, types);
    return !was_empty && child.is_structured() && child.empty();
  };
  if (value.is_object()) {
    if (!path.empty() && types.atomic_map(pattern)) return;
    for (auto it = value.begin(); it != value.end();) {
      path.push_back("f:" + it.key());
      const bool drop = visit(it.value(), field_pattern(pattern, it.key()));
      path.pop_back();
      it = drop ? value.erase(it) : std::next(it);
    }
  } else if (value.is_array()) {
    const auto keys = element_keys(value, types.list_rule(pattern));
    if (!keys) return;
    json kept = json::array();
    for (std::size_t i = 0; i < value.size(); ++i) {
      path.push_back((*keys)[i]);
      const bool drop = visit(value[i], item_pattern(pattern));
      path.pop_back();
      if (!drop) kept.push_back(std::move(value[i]));
    }
    value = std::move(kept);
  }
}

}  // namespace

FieldSet fields_of(const json& object, const MergeTypes& types) {
  FieldSet out;
  FieldPath path;
  collect_fields(object, path, "", types, out);
  return out;
}

Comparison compare_objects(const json& old_object, const json& new_object,
                           const MergeTypes& types) {
  Comparison out;
  Comparer comparer{types, out};
  FieldPath path;
  comparer.node(&old_object, &new_object, path, "");
  return out;
}

json merge_objects(const json& live, const json& config, const MergeTypes& types) {
  return merge_node(live, config, "", types, true);
}

void remove_fields(json& object, const FieldSet& fields, const MergeTypes& types) {
  FieldPath path;
  remove_below(object, fields, path, "", types);
}

}  // namespace tessel::testing
