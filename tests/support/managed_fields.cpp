#include "tests/support/managed_fields.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "tests/support/api_object_meta.h"
#include "tests/support/managed_fields_set.h"
#include "tests/support/managed_fields_walk.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

constexpr const char* kLastApplied = "kubectl.kubernetes.io/last-applied-configuration";
constexpr std::size_t kFieldManagerMaxLength = 128;

// One metadata.managedFields entry. Entries are told apart as kube-apiserver tells managers
// apart: by name, operation, subresource, and for Update also the apiVersion.
struct Entry {
  std::string manager;
  std::string operation;  // "Apply" or "Update"
  std::string api_version;
  std::string subresource;
  std::string time;
  FieldSet fields;

  bool same_manager(const std::string& m, const std::string& op, const std::string& version,
                    const std::string& sub) const {
    return manager == m && operation == op && subresource == sub &&
           (op == "Apply" || api_version == version);
  }
  auto sort_key() const { return std::tie(manager, operation, api_version, subresource); }
};

std::string now_rfc3339() { return rfc3339(std::chrono::system_clock::now()); }

// The fields kube-apiserver never records as anyone's (its stripMetaManager).
const FieldSet& stripped_fields() {
  static const FieldSet set = [] {
    FieldSet s;
    s.insert({"f:apiVersion"});
    s.insert({"f:kind"});
    s.insert({"f:metadata"});
    for (const char* f : {"name", "namespace", "creationTimestamp", "selfLink", "uid",
                          "clusterName", "generation", "managedFields", "resourceVersion"}) {
      s.insert({"f:metadata", std::string("f:") + f});
    }
    return s;
  }();
  return set;
}

FieldSet ignored_set(const MergeTypes& types, const std::string& subresource) {
  FieldSet set;
  for (const auto& path : types.ignored_fields(subresource)) {
    FieldPath fp;
    for (const auto& field : path) fp.push_back("f:" + field);
    set.insert(fp);
  }
  return set;
}

// nullopt when the list is not a valid managedFields list.
std::optional<std::vector<Entry>> decode_entries(const json& managed_fields) {
  std::vector<Entry> out;
  if (managed_fields.is_null()) return out;
  if (!managed_fields.is_array()) return std::nullopt;
  try {
    for (const auto& e : managed_fields) {
      Entry entry;
      entry.manager = e.value("manager", "");
      entry.operation = e.value("operation", "");
      entry.api_version = e.value("apiVersion", "");
      entry.subresource = e.value("subresource", "");
      entry.time = e.value("time", "");
      if (entry.operation != "Apply" && entry.operation != "Update") return std::nullopt;
      if (e.contains("fieldsV1")) entry.fields = FieldSet::from_fields_v1(e["fieldsV1"]);
      out.push_back(std::move(entry));
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return out;
}

// kube-apiserver's order: operation, time, manager, apiVersion, subresource.
json encode_entries(std::vector<Entry> entries) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.operation, a.time, a.manager, a.api_version, a.subresource) <
           std::tie(b.operation, b.time, b.manager, b.api_version, b.subresource);
  });
  json out = json::array();
  for (const auto& e : entries) {
    json entry = {{"apiVersion", e.api_version},
                  {"fieldsType", "FieldsV1"},
                  {"fieldsV1", e.fields.to_fields_v1()},
                  {"manager", e.manager},
                  {"operation", e.operation},
                  {"time", e.time}};
    if (!e.subresource.empty()) entry["subresource"] = e.subresource;
    out.push_back(std::move(entry));
  }
  return out;
}

void store_entries(json& object, std::vector<Entry> entries) {
  std::erase_if(entries, [](const Entry& e) { return e.fields.empty(); });
  if (entries.empty()) {
    if (object.contains("metadata") && object["metadata"].is_object()) {
      object["metadata"].erase("managedFields");
    }
    return;
  }
  object["metadata"]["managedFields"] = encode_entries(std::move(entries));
}

json without_managed_fields(const json& object) {
  json out = object;
  if (out.is_object() && out.contains("metadata") && out["metadata"].is_object()) {
    out["metadata"].erase("managedFields");
  }
  return out;
}

json managed_fields_of(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return nullptr;
  }
  return object["metadata"].value("managedFields", json());
}

// How kube-apiserver names a manager in conflict messages.
std::string manager_display(const Entry& e) {
  std::string out = json(e.manager).dump();
  if (!e.subresource.empty()) out += " with subresource " + json(e.subresource).dump();
  if (e.operation == "Update") out += " using " + e.api_version;
  return out;
}

struct Conflict {
  const Entry* owner;
  FieldPath path;
};

ApplyResult conflict_result(std::vector<Conflict> conflicts) {
  std::stable_sort(conflicts.begin(), conflicts.end(), [](const Conflict& a, const Conflict& b) {
    return a.owner->sort_key() < b.owner->sort_key();
  });
  ApplyResult result;
  json causes = json::array();
  for (const auto& c : conflicts) {
    const std::string with = "conflict with " + manager_display(*c.owner);
    result.conflicts.push_back(with + ": " + path_string(c.path));
    causes.push_back(
        {{"reason", "FieldManagerConflict"}, {"message", with}, {"field", path_string(c.path)}});
  }
  std::string message;
  if (conflicts.size() == 1) {
    message = "Apply failed with 1 conflict: " + result.conflicts.front();
  } else {
    message = "Apply failed with " + std::to_string(conflicts.size()) + " conflicts: ";
    const Entry* current = nullptr;
    for (const auto& c : conflicts) {
      if (c.owner != current) {
        if (current != nullptr) message += "\n";
        message += "conflicts with " + manager_display(*c.owner) + ":";
        current = c.owner;
      }
      message += "\n- " + path_string(c.path);
    }
  }
  result.conflict_status = {{"kind", "Status"},
                            {"apiVersion", "v1"},
                            {"metadata", json::object()},
                            {"status", "Failure"},
                            {"message", message},
                            {"reason", "Conflict"},
                            {"details", {{"causes", causes}}},
                            {"code", 409}};
  return result;
}

// Go's encoding/json escapes these inside strings; so does the annotation kube-apiserver writes.
std::string go_json(const json& value) {
  std::string out;
  for (char c : value.dump()) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out + "\n";
}

// kubectl's server-side apply keeps a client-side apply annotation in step (kube-apiserver's
// lastAppliedUpdater): when the object carries one, it becomes the applied configuration.
void sync_last_applied(json& object, const json& applied, const std::string& manager) {
  if (manager != "kubectl") return;
  const json& annotations = object["metadata"].value("annotations", json::object());
  if (!annotations.is_object() || !annotations.contains(kLastApplied)) return;
  json config = applied;
  if (config.contains("metadata") && config["metadata"].contains("annotations") &&
      config["metadata"]["annotations"].is_object()) {
    config["metadata"]["annotations"].erase(kLastApplied);
  }
  object["metadata"]["annotations"][kLastApplied] = go_json(config);
}

// Whether `fields` says to reset the managed fields (an empty list, or one empty entry).
bool is_reset(const json& fields) {
  if (!fields.is_array()) return false;
  if (fields.empty()) return true;
  return fields.size() == 1 && fields[0].is_object() && fields[0].empty();
}

}  // namespace

ApplyResult server_side_apply(const json& live, const json& applied, const std::string& manager,
                              bool force, const std::string& subresource) {
  const json& kind_source = live.is_null() ? applied : live;
  return server_side_apply(
      live, applied, manager, force, subresource,
      MergeTypes::for_kind(kind_source.value("apiVersion", ""), kind_source.value("kind", "")));
}

ApplyResult server_side_apply(const json& live, const json& applied, const std::string& manager,
                              bool force, const std::string& subresource, const MergeTypes& types) {
  if (!applied.is_object()) {
    throw std::invalid_argument("the applied configuration must be an object, got " +
                                applied.dump());
  }
  if (!managed_fields_of(applied).is_null()) {
    throw std::invalid_argument("metadata.managedFields must be nil");
  }
  const std::string api_version = applied.value("apiVersion", "");
  if (!live.is_null() && api_version != live.value("apiVersion", "")) {
    throw std::invalid_argument(
        "Incorrect version specified in apply patch. Specified patch version: " + api_version +
        ", expected: " + live.value("apiVersion", ""));
  }
  const json live_plain = live.is_null()
                              ? types.empty_object(api_version, applied.value("kind", ""))
                              : without_managed_fields(live);
  auto entries = decode_entries(managed_fields_of(live)).value_or(std::vector<Entry>{});
  const FieldSet ignored = ignored_set(types, subresource);

  const std::size_t self =
      std::find_if(entries.begin(), entries.end(),
                   [&](const Entry& e) {
                     return e.same_manager(manager, "Apply", api_version, subresource);
                   }) -
      entries.begin();
  const bool first_apply = self == entries.size();
  if (first_apply) entries.push_back({manager, "Apply", api_version, subresource, "", {}});
  const FieldSet last = entries[self].fields;
  const FieldSet config =
      fields_of(applied, types).recursive_difference(ignored).difference(stripped_fields());

  json merged = merge_objects(live_plain, applied, types);

  // Prune what this manager applied last time and no longer does, unless someone else owns it.
  FieldSet owned_by_others;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i != self) owned_by_others = owned_by_others.union_with(entries[i].fields);
  }
  const FieldSet owned = owned_by_others.union_with(config);
  FieldSet prune;
  for (const auto& path : last.difference(config).difference(owned_by_others).paths()) {
    if (!owned.has_at_or_below(path)) prune.insert(path);
  }
  remove_fields(merged, prune, types);

  Comparison change = compare_objects(live_plain, merged, types);
  const FieldSet changed = change.modified.union_with(change.added).recursive_difference(ignored);
  const FieldSet removed = change.removed.recursive_difference(ignored);
  std::vector<Conflict> conflicts;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i == self) continue;
    for (const auto& path : entries[i].fields.intersection(changed).paths()) {
      conflicts.push_back({&entries[i], path});
    }
  }
  if (!force && !conflicts.empty()) return conflict_result(std::move(conflicts));

  const std::vector<Entry> before = entries;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i != self) entries[i].fields = entries[i].fields.difference(changed).difference(removed);
  }
  entries[self].fields = config;
  entries[self].api_version = api_version;
  const bool ownership_changed =
      !std::equal(before.begin(), before.end(), entries.begin(),
                  [](const Entry& a, const Entry& b) { return a.fields == b.fields; });
  if (first_apply || ownership_changed || merged != live_plain) {
    entries[self].time = now_rfc3339();
  }

  sync_last_applied(merged, applied, manager);
  store_entries(merged, std::move(entries));
  return {std::move(merged), {}, nullptr};
}

void record_update(json& new_object, const json& old_object, const std::string& manager,
                   const std::string& subresource) {
  record_update(
      new_object, old_object, manager, subresource,
      MergeTypes::for_kind(new_object.value("apiVersion", ""), new_object.value("kind", "")));
}

void record_update(json& new_object, const json& old_object, const std::string& manager,
                   const std::string& subresource, const MergeTypes& types) {
  const std::string api_version = new_object.value("apiVersion", "");
  const json old_plain = old_object.is_null()
                             ? types.empty_object(api_version, new_object.value("kind", ""))
                             : without_managed_fields(old_object);

  // The request may set managedFields itself (not through a subresource); an empty list resets.
  std::vector<Entry> entries;
  const json given = managed_fields_of(new_object);
  const auto live_entries = [&] {
    return decode_entries(managed_fields_of(old_object)).value_or(std::vector<Entry>{});
  };
  if (!subresource.empty()) {
    entries = live_entries();
  } else if (is_reset(given)) {
    entries.clear();
  } else if (auto decoded = decode_entries(given); decoded && !decoded->empty()) {
    entries = std::move(*decoded);
  } else {
    entries = live_entries();
  }
  new_object = without_managed_fields(new_object);

  const FieldSet ignored = ignored_set(types, subresource);
  Comparison change = compare_objects(old_plain, new_object, types);
  const FieldSet changed = change.modified.union_with(change.added).recursive_difference(ignored);
  const FieldSet removed = change.removed.recursive_difference(ignored);
  // The writer takes over whatever it changed, from every manager (its own older entries too).
  for (auto& e : entries) e.fields = e.fields.difference(changed).difference(removed);
  const FieldSet taken = changed.difference(removed).difference(stripped_fields());
  if (!taken.empty()) {
    auto self = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) {
      return e.same_manager(manager, "Update", api_version, subresource);
    });
    if (self == entries.end()) {
      entries.push_back({manager, "Update", api_version, subresource, "", FieldSet{}});
      self = entries.end() - 1;
    }
    self->fields = self->fields.union_with(taken);
    self->time = now_rfc3339();
  }
  store_entries(new_object, std::move(entries));
}

std::string default_manager(const std::string& user_agent) {
  const std::string prefix = user_agent.substr(0, user_agent.find('/'));
  std::string out;
  for (std::size_t i = 0; i < prefix.size();) {
    const auto lead = static_cast<unsigned char>(prefix[i]);
    const std::size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const bool printable = lead >= 0x80 || (lead >= 0x20 && lead != 0x7F);
    if (printable) {
      if (out.size() + length > kFieldManagerMaxLength) break;
      out += prefix.substr(i, length);
    }
    i += length;
  }
  return out;
}

json missing_field_manager_status() {
  const std::string cause = "Required value: is required for apply patch";
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Failure"},
          {"message", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: " + cause},
          {"reason", "Invalid"},
          {"details",
           {{"group", "meta.k8s.io"},
            {"kind", "PatchOptions"},
            {"causes", json::array({{{"reason", "FieldValueRequired"},
                                     {"message", cause},
                                     {"field", "fieldManager"}}})}}},
          {"code", 422}};
}

}  // namespace tessel::testing
