#include "tests/support/api_rbac_escalation.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "tests/support/api_errors.h"
#include "tests/support/api_rbac.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

std::vector<std::string> strings(const json& rule, const char* field) {
  std::vector<std::string> out;
  if (!rule.is_object() || !rule.contains(field) || !rule[field].is_array()) return out;
  for (const json& value : rule[field]) {
    if (value.is_string()) out.push_back(value.get<std::string>());
  }
  return out;
}

bool listed(const std::vector<std::string>& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// One permission of a rule: a verb on a group's resource (and name), or on a URL.
struct Atom {
  std::string verb;
  std::string group;
  std::string resource;
  std::string name;
  std::string url;  // non-resource rules only
};

std::vector<Atom> atoms_of(const json& rule) {
  std::vector<Atom> out;
  const std::vector<std::string> urls = strings(rule, "nonResourceURLs");
  for (const std::string& verb : strings(rule, "verbs")) {
    for (const std::string& url : urls) out.push_back({verb, "", "", "", url});
    for (const std::string& group : strings(rule, "apiGroups")) {
      for (const std::string& resource : strings(rule, "resources")) {
        std::vector<std::string> names = strings(rule, "resourceNames");
        if (names.empty()) names.push_back("");
        for (const std::string& name : names) out.push_back({verb, group, resource, name, ""});
      }
    }
  }
  return out;
}

// Whether an owner's rule grants the atom (RBAC's ruleCovers, for one atom).
bool covers(const json& rule, const Atom& atom) {
  const std::vector<std::string> verbs = strings(rule, "verbs");
  if (!listed(verbs, "*") && !listed(verbs, atom.verb)) return false;
  if (!atom.url.empty()) {
    for (const std::string& url : strings(rule, "nonResourceURLs")) {
      if (url == "*" || url == atom.url) return true;
      if (url.ends_with("*") && atom.url.starts_with(url.substr(0, url.size() - 1))) return true;
    }
    return false;
  }
  const std::vector<std::string> groups = strings(rule, "apiGroups");
  if (!listed(groups, "*") && !listed(groups, atom.group)) return false;
  bool resource = false;
  for (const std::string& owned : strings(rule, "resources")) {
    const std::size_t slash = atom.resource.find('/');
    resource = resource || owned == "*" || owned == atom.resource ||
               (slash != std::string::npos && owned == "*" + atom.resource.substr(slash));
  }
  if (!resource) return false;
  const std::vector<std::string> names = strings(rule, "resourceNames");
  return names.empty() || (!atom.name.empty() && listed(names, atom.name));
}

std::string quoted(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& value : values) out += (out.empty() ? "" : " ") + json(value).dump();
  return "[" + out + "]";
}

// The missing atoms as RBAC's CompactString lines, atoms differing only in verb merged, sorted.
std::string describe_missing(const std::vector<Atom>& missing) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<std::string>>
      verbs;
  for (const Atom& atom : missing) {
    auto& list = verbs[{atom.group, atom.resource, atom.name, atom.url}];
    if (!listed(list, atom.verb)) list.push_back(atom.verb);
  }
  std::set<std::string> lines;
  for (const auto& [key, verb_list] : verbs) {
    const auto& [group, resource, name, url] = key;
    std::vector<std::string> parts;
    if (url.empty()) {
      parts.push_back("APIGroups:" + quoted({group}));
      parts.push_back("Resources:" + quoted({resource}));
    } else {
      parts.push_back("NonResourceURLs:" + quoted({url}));
    }
    if (!name.empty()) parts.push_back("ResourceNames:" + quoted({name}));
    parts.push_back("Verbs:" + quoted(verb_list));
    std::string line;
    for (const std::string& part : parts) line += (line.empty() ? "" : ", ") + part;
    lines.insert("{" + line + "}");
  }
  std::string out;
  for (const std::string& line : lines) out += (out.empty() ? "" : "\n") + line;
  return out;
}

std::string meta(const json& object, const char* field) {
  const json metadata = object.value("metadata", json::object());
  return metadata.contains(field) && metadata[field].is_string()
             ? metadata[field].get<std::string>()
             : "";
}

}  // namespace

bool is_rbac_kind(const ResourceType& type) {
  const std::string& r = type.resource();
  return type.group() == kRbacGroup &&
         (r == "roles" || r == "clusterroles" || r == "rolebindings" || r == "clusterrolebindings");
}

void confirm_no_escalation(const ResourceType& type, const json& object, const UserInfo& user,
                           const Authorizer& authorizer, const RuleResolver& rules,
                           const ObjectStore& store) {
  const std::string namespace_ = type.namespaced() ? meta(object, "namespace") : "";
  const std::string name = meta(object, "name");
  const bool binding = type.resource().ends_with("bindings");
  RequestAttributes shortcut;
  shortcut.user = user;
  shortcut.api_group = kRbacGroup;
  shortcut.namespace_ = namespace_;
  json granted;
  if (binding) {
    const json role_ref = object.value("roleRef", json::object());
    const bool cluster_role = role_ref.value("kind", "") == "ClusterRole";
    shortcut.verb = "bind";
    shortcut.resource = cluster_role ? "clusterroles" : "roles";
    shortcut.name = role_ref.value("name", "");
    const std::optional<json> role =
        cluster_role ? store.get({kRbacGroup, "clusterroles"}, "", shortcut.name)
                     : store.get({kRbacGroup, "roles"}, namespace_, shortcut.name);
    granted = role ? role->value("rules", json::array()) : json::array();
  } else {
    shortcut.verb = "escalate";
    shortcut.resource = type.resource();
    shortcut.name = name;
    granted = object.value("rules", json::array());
  }
  if (authorizer(shortcut)) return;
  const std::optional<std::vector<json>> held = rules ? rules(user, namespace_) : std::nullopt;
  if (!held) return;
  std::vector<Atom> missing;
  for (const json& rule : granted.is_array() ? granted : json::array()) {
    for (const Atom& atom : atoms_of(rule)) {
      const bool owned = std::any_of(held->begin(), held->end(),
                                     [&](const json& own) { return covers(own, atom); });
      if (!owned) missing.push_back(atom);
    }
  }
  if (missing.empty()) return;
  throw forbidden(type.group_resource(), name,
                  "user " + json(user.name).dump() + " (groups=" + quoted(user.groups) +
                      ") is attempting to grant RBAC permissions not currently held:\n" +
                      describe_missing(missing));
}

}  // namespace tessel::testing
