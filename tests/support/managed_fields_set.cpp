#include "tests/support/managed_fields_set.h"

#include <stdexcept>

namespace tessel::testing {
namespace {

int element_rank(const PathElement& e) {
  switch (e.empty() ? ' ' : e[0]) {
    case 'f':
      return 0;
    case 'k':
      return 1;
    case 'v':
      return 2;
    default:
      return 3;
  }
}

// structured-merge-diff's value.ToString: strings quoted, everything else as JSON writes it.
std::string value_string(const nlohmann::json& value) { return value.dump(); }

std::string element_string(const PathElement& e) {
  const std::string rest = e.substr(2);
  switch (e[0]) {
    case 'f':
      return "." + rest;
    case 'k': {
      std::string out = "[";
      bool first = true;
      const nlohmann::json key = nlohmann::json::parse(rest);
      for (const auto& [name, value] : key.items()) {
        out += (first ? "" : ",") + name + "=" + value_string(value);
        first = false;
      }
      return out + "]";
    }
    case 'v':
      return "[=" + value_string(nlohmann::json::parse(rest)) + "]";
    default:
      return "[" + rest + "]";
  }
}

bool valid_element(const std::string& key) {
  if (key.size() < 3 || key[1] != ':') return false;
  const std::string rest = key.substr(2);
  switch (key[0]) {
    case 'f':
      return true;
    case 'k':
      return nlohmann::json::accept(rest) && nlohmann::json::parse(rest).is_object();
    case 'v':
      return nlohmann::json::accept(rest);
    case 'i':
      return rest.find_first_not_of("0123456789") == std::string::npos;
    default:
      return false;
  }
}

}  // namespace

bool PathElementOrder::operator()(const PathElement& a, const PathElement& b) const {
  const int ra = element_rank(a);
  const int rb = element_rank(b);
  if (ra != rb) return ra < rb;
  if (ra == 3 && a.size() != b.size()) return a.size() < b.size();  // indexes numerically
  return a < b;
}

std::string path_string(const FieldPath& path) {
  std::string out;
  for (const auto& e : path) out += element_string(e);
  return out;
}

FieldSet FieldSet::from_fields_v1(const nlohmann::json& fields) {
  FieldSet set;
  read(fields, set.root_, "fieldsV1");
  return set;
}

void FieldSet::read(const nlohmann::json& fields, Node& node, const std::string& where) {
  if (!fields.is_object()) {
    throw std::invalid_argument(where + ": FieldsV1 must be an object, got " + fields.dump());
  }
  for (const auto& [key, value] : fields.items()) {
    if (key == ".") {
      node.member = true;
      continue;
    }
    if (!valid_element(key)) {
      throw std::invalid_argument(where + ": not a FieldsV1 path element: \"" + key + "\"");
    }
    Node& child = node.children[key];
    if (value.is_object() && value.empty()) child.member = true;
    read(value, child, where + "." + key);
  }
}

nlohmann::json FieldSet::to_fields_v1() const { return write(root_); }

nlohmann::json FieldSet::write(const Node& node) {
  nlohmann::json out = nlohmann::json::object();
  if (node.member && !node.children.empty()) out["."] = nlohmann::json::object();
  for (const auto& [element, child] : node.children) out[element] = write(child);
  return out;
}

void FieldSet::insert(const FieldPath& path) {
  if (path.empty()) return;  // the root is never owned
  Node* node = &root_;
  for (const auto& e : path) node = &node->children[e];
  node->member = true;
}

bool FieldSet::has(const FieldPath& path) const {
  const Node* node = &root_;
  for (const auto& e : path) {
    auto it = node->children.find(e);
    if (it == node->children.end()) return false;
    node = &it->second;
  }
  return !path.empty() && node->member;
}

bool FieldSet::has_at_or_below(const FieldPath& path) const {
  const Node* node = &root_;
  for (const auto& e : path) {
    auto it = node->children.find(e);
    if (it == node->children.end()) return false;
    node = &it->second;
  }
  return any_member(*node);
}

bool FieldSet::any_member(const Node& node) {
  if (node.member) return true;
  for (const auto& [e, child] : node.children) {
    if (any_member(child)) return true;
  }
  return false;
}

bool FieldSet::empty() const { return !any_member(root_); }

FieldSet FieldSet::union_with(const FieldSet& other) const {
  FieldSet out = *this;
  for (const auto& p : other.paths()) out.insert(p);
  return out;
}

FieldSet FieldSet::difference(const FieldSet& other) const {
  FieldSet out;
  for (const auto& p : paths()) {
    if (!other.has(p)) out.insert(p);
  }
  return out;
}

FieldSet FieldSet::intersection(const FieldSet& other) const {
  FieldSet out;
  for (const auto& p : paths()) {
    if (other.has(p)) out.insert(p);
  }
  return out;
}

FieldSet FieldSet::recursive_difference(const FieldSet& other) const {
  FieldSet out;
  for (const auto& p : paths()) {
    bool covered = false;
    for (std::size_t n = 1; n <= p.size() && !covered; ++n) {
      covered = other.has(FieldPath(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(n)));
    }
    if (!covered) out.insert(p);
  }
  return out;
}

std::vector<FieldPath> FieldSet::paths() const {
  std::vector<FieldPath> out;
  FieldPath prefix;
  collect(root_, prefix, out);
  return out;
}

void FieldSet::collect(const Node& node, FieldPath& prefix, std::vector<FieldPath>& out) {
  for (const auto& [e, child] : node.children) {
    if (!child.member) continue;
    prefix.push_back(e);
    out.push_back(prefix);
    prefix.pop_back();
  }
  for (const auto& [e, child] : node.children) {
    prefix.push_back(e);
    collect(child, prefix, out);
    prefix.pop_back();
  }
}

}  // namespace tessel::testing
