#include "kube/object.h"

#include <algorithm>
#include <ctime>
#include <stdexcept>

namespace tessel::kube {
namespace {

using nlohmann::json;

const json& null_json() {
  static const json kNull;
  return kNull;
}

// obj[a][b]..., or null when any step is missing or not an object.
const json& lookup(const json& obj, std::initializer_list<std::string_view> path) {
  const json* node = &obj;
  for (std::string_view step : path) {
    if (!node->is_object()) return null_json();
    auto it = node->find(step);
    if (it == node->end()) return null_json();
    node = &*it;
  }
  return *node;
}

std::string string_at(const json& obj, std::initializer_list<std::string_view> path) {
  const json& value = lookup(obj, path);
  return value.is_string() ? value.get<std::string>() : std::string();
}

// obj.metadata.<field> as an object, created (replacing null) when absent.
json& metadata_object(json& obj, const char* field) {
  json& metadata = obj["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  json& map = metadata[field];
  if (!map.is_object()) map = json::object();
  return map;
}

std::map<std::string, std::string> string_map_at(const json& obj, const char* field) {
  std::map<std::string, std::string> result;
  const json& map = lookup(obj, {"metadata", field});
  if (!map.is_object()) return result;
  for (const auto& [key, value] : map.items()) {
    if (value.is_string()) result.emplace(key, value.get<std::string>());
  }
  return result;
}

std::optional<std::string> string_map_get(const json& obj, const char* field,
                                          std::string_view key) {
  const json& value = lookup(obj, {"metadata", field, key});
  if (!value.is_string()) return std::nullopt;
  return value.get<std::string>();
}

bool string_map_remove(json& obj, const char* field, const std::string& key) {
  if (!lookup(obj, {"metadata", field}).is_object()) return false;
  return obj["metadata"][field].erase(key) > 0;
}

}  // namespace

// --- metadata -------------------------------------------------------------------------------

std::string object_name(const json& obj) { return string_at(obj, {"metadata", "name"}); }

std::string object_namespace(const json& obj) { return string_at(obj, {"metadata", "namespace"}); }

std::string object_uid(const json& obj) { return string_at(obj, {"metadata", "uid"}); }

std::string object_resource_version(const json& obj) {
  return string_at(obj, {"metadata", "resourceVersion"});
}

std::int64_t object_generation(const json& obj) {
  const json& value = lookup(obj, {"metadata", "generation"});
  return value.is_number_integer() ? value.get<std::int64_t>() : 0;
}

std::string object_key(const json& obj) {
  std::string ns = object_namespace(obj);
  return ns.empty() ? object_name(obj) : ns + "/" + object_name(obj);
}

bool is_being_deleted(const json& obj) {
  const json& value = lookup(obj, {"metadata", "deletionTimestamp"});
  return value.is_string() && !value.get<std::string>().empty();
}

// --- labels and annotations -----------------------------------------------------------------

std::map<std::string, std::string> object_labels(const json& obj) {
  return string_map_at(obj, "labels");
}

std::optional<std::string> get_label(const json& obj, std::string_view key) {
  return string_map_get(obj, "labels", key);
}

void set_label(json& obj, const std::string& key, const std::string& value) {
  metadata_object(obj, "labels")[key] = value;
}

bool remove_label(json& obj, const std::string& key) {
  return string_map_remove(obj, "labels", key);
}

std::map<std::string, std::string> object_annotations(const json& obj) {
  return string_map_at(obj, "annotations");
}

std::optional<std::string> get_annotation(const json& obj, std::string_view key) {
  return string_map_get(obj, "annotations", key);
}

void set_annotation(json& obj, const std::string& key, const std::string& value) {
  metadata_object(obj, "annotations")[key] = value;
}

bool remove_annotation(json& obj, const std::string& key) {
  return string_map_remove(obj, "annotations", key);
}

json annotation_merge_patch(const std::string& key, const std::optional<std::string>& value) {
  json patch;
  patch["metadata"]["annotations"][key] = value ? json(*value) : json(nullptr);
  return patch;
}

// --- ownerReferences ------------------------------------------------------------------------

json controller_reference(const json& owner) {
  return json{{"apiVersion", string_at(owner, {"apiVersion"})},
              {"kind", string_at(owner, {"kind"})},
              {"name", object_name(owner)},
              {"uid", object_uid(owner)},
              {"controller", true}};
}

bool set_controller_reference(json& obj, const json& owner) {
  const std::string owner_ns = object_namespace(owner);
  if (!owner_ns.empty() && owner_ns != object_namespace(obj)) {
    throw std::invalid_argument("owner " + object_key(owner) +
                                " is namespaced and cannot own an object outside namespace " +
                                owner_ns);
  }
  if (object_uid(owner).empty()) {
    throw std::invalid_argument("owner " + object_key(owner) + " has no uid yet");
  }
  json reference = controller_reference(owner);
  if (auto current = controller_owner(obj);
      current && current->value("uid", "") != reference["uid"]) {
    throw std::invalid_argument("object " + object_key(obj) + " is already controlled by " +
                                current->value("kind", "") + " " + current->value("name", ""));
  }
  json& metadata = obj["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  json& references = metadata["ownerReferences"];
  if (!references.is_array()) references = json::array();
  for (json& existing : references) {
    if (existing.value("uid", "") == reference["uid"]) {
      if (existing == reference) return false;
      existing = reference;
      return true;
    }
  }
  references.push_back(std::move(reference));
  return true;
}

std::optional<json> controller_owner(const json& obj) {
  const json& references = lookup(obj, {"metadata", "ownerReferences"});
  if (!references.is_array()) return std::nullopt;
  for (const json& reference : references) {
    if (reference.is_object() && reference.value("controller", false)) return reference;
  }
  return std::nullopt;
}

// --- finalizers -----------------------------------------------------------------------------

std::vector<std::string> object_finalizers(const json& obj) {
  std::vector<std::string> result;
  const json& finalizers = lookup(obj, {"metadata", "finalizers"});
  if (!finalizers.is_array()) return result;
  for (const json& finalizer : finalizers) {
    if (finalizer.is_string()) result.push_back(finalizer.get<std::string>());
  }
  return result;
}

bool has_finalizer(const json& obj, std::string_view finalizer) {
  const std::vector<std::string> finalizers = object_finalizers(obj);
  return std::find(finalizers.begin(), finalizers.end(), finalizer) != finalizers.end();
}

bool add_finalizer(json& obj, const std::string& finalizer) {
  if (has_finalizer(obj, finalizer)) return false;
  json& metadata = obj["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  json& finalizers = metadata["finalizers"];
  if (!finalizers.is_array()) finalizers = json::array();
  finalizers.push_back(finalizer);
  return true;
}

bool remove_finalizer(json& obj, const std::string& finalizer) {
  if (!has_finalizer(obj, finalizer)) return false;
  json& finalizers = obj["metadata"]["finalizers"];
  json kept = json::array();
  for (json& entry : finalizers) {
    if (entry != finalizer) kept.push_back(std::move(entry));
  }
  // An empty list and an absent one mean the same to the server; drop the key.
  if (kept.empty()) {
    obj["metadata"].erase("finalizers");
  } else {
    finalizers = std::move(kept);
  }
  return true;
}

// --- status.conditions ----------------------------------------------------------------------

std::optional<Condition> find_condition(const json& obj, std::string_view type) {
  const json& conditions = lookup(obj, {"status", "conditions"});
  if (!conditions.is_array()) return std::nullopt;
  for (const json& entry : conditions) {
    if (!entry.is_object() || entry.value("type", "") != type) continue;
    Condition condition;
    condition.type = entry.value("type", "");
    condition.status = entry.value("status", "");
    condition.reason = entry.value("reason", "");
    condition.message = entry.value("message", "");
    condition.last_transition_time = entry.value("lastTransitionTime", "");
    condition.observed_generation = entry.value("observedGeneration", std::int64_t{0});
    return condition;
  }
  return std::nullopt;
}

bool is_condition_true(const json& obj, std::string_view type) {
  auto condition = find_condition(obj, type);
  return condition && condition->status == "True";
}

bool set_condition(json& obj, const Condition& condition,
                   std::chrono::system_clock::time_point now) {
  if (condition.type.empty()) throw std::invalid_argument("condition type is empty");
  if (condition.status != "True" && condition.status != "False" && condition.status != "Unknown") {
    throw std::invalid_argument("condition " + condition.type + " has status \"" +
                                condition.status + "\", want True, False or Unknown");
  }
  json& status = obj["status"];
  if (!status.is_object()) status = json::object();
  json& conditions = status["conditions"];
  if (!conditions.is_array()) conditions = json::array();

  auto existing = std::find_if(conditions.begin(), conditions.end(), [&](const json& entry) {
    return entry.is_object() && entry.value("type", "") == condition.type;
  });
  // Start from the stored entry so fields this struct does not model survive.
  json updated = existing != conditions.end() ? *existing : json::object();
  const bool transition = updated.value("status", "") != condition.status ||
                          updated.value("lastTransitionTime", "").empty();
  updated["type"] = condition.type;
  updated["status"] = condition.status;
  updated["reason"] = condition.reason;
  updated["message"] = condition.message;
  if (transition) updated["lastTransitionTime"] = format_rfc3339(now);
  if (condition.observed_generation > 0) {
    updated["observedGeneration"] = condition.observed_generation;
  } else {
    updated.erase("observedGeneration");
  }

  if (existing == conditions.end()) {
    conditions.push_back(std::move(updated));
    return true;
  }
  if (*existing == updated) return false;
  *existing = std::move(updated);
  return true;
}

std::string format_rfc3339(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// --- label selectors ------------------------------------------------------------------------

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// A label name or value: at most 63 of [A-Za-z0-9-_.], starting and ending alphanumeric.
bool is_label_name(std::string_view text, bool allow_empty) {
  if (text.empty()) return allow_empty;
  if (text.size() > 63 || !is_alnum(text.front()) || !is_alnum(text.back())) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A label key: an optional DNS-subdomain prefix and '/', then a label name.
bool is_label_key(std::string_view key) {
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) return is_label_name(key, false);
  const std::string_view prefix = key.substr(0, slash);
  const bool prefix_ok =
      !prefix.empty() && prefix.size() <= 253 && is_alnum(prefix.front()) &&
      is_alnum(prefix.back()) && std::all_of(prefix.begin(), prefix.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
      });
  return prefix_ok && is_label_name(key.substr(slash + 1), false);
}

[[noreturn]] void bad_term(std::string_view kind, std::string_view term, std::string_view why) {
  throw std::invalid_argument("invalid " + std::string(kind) + " selector term \"" +
                              std::string(term) + "\": " + std::string(why));
}

// Splits at commas outside parentheses ("a in (x,y),b" is two terms).
std::vector<std::string_view> split_terms(std::string_view text) {
  std::vector<std::string_view> terms;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      terms.push_back(text.substr(start, i - start));
      start = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      --depth;
    }
  }
  return terms;
}

LabelRequirement parse_set_term(std::string_view term) {
  const auto space = term.find_first_of(" \t(");
  LabelRequirement requirement;
  requirement.key = std::string(term.substr(0, space));
  std::string_view rest = trim(term.substr(space));
  if (rest.starts_with("notin")) {
    requirement.op = SelectorOperator::kNotIn;
    rest = trim(rest.substr(5));
  } else if (rest.starts_with("in")) {
    requirement.op = SelectorOperator::kIn;
    rest = trim(rest.substr(2));
  } else {
    bad_term("label", term, "expected 'in' or 'notin' before '('");
  }
  if (!rest.starts_with('(') || !rest.ends_with(')')) {
    bad_term("label", term, "expected a parenthesised value list");
  }
  std::string_view list = rest.substr(1, rest.size() - 2);
  if (trim(list).empty()) bad_term("label", term, "empty value list");
  for (std::string_view value : split_terms(list)) {
    value = trim(value);
    if (!is_label_name(value, true)) {
      bad_term("label", term, "invalid value \"" + std::string(value) + "\"");
    }
    requirement.values.emplace_back(value);
  }
  return requirement;
}

LabelRequirement parse_label_term(std::string_view term) {
  LabelRequirement requirement;
  const auto op = term.find_first_of("!=");
  const auto paren = term.find('(');
  if (term.starts_with('!') && term.find('=') == std::string_view::npos) {
    requirement.key = std::string(trim(term.substr(1)));
    requirement.op = SelectorOperator::kDoesNotExist;
  } else if (paren != std::string_view::npos && paren < op) {
    requirement = parse_set_term(term);
  } else if (op != std::string_view::npos) {
    std::size_t value_start = op + 1;
    if (term[op] == '!') {
      if (op + 1 >= term.size() || term[op + 1] != '=') bad_term("label", term, "expected '!='");
      requirement.op = SelectorOperator::kNotEquals;
      value_start = op + 2;
    } else {
      requirement.op = SelectorOperator::kEquals;
      if (op + 1 < term.size() && term[op + 1] == '=') value_start = op + 2;
    }
    requirement.key = std::string(trim(term.substr(0, op)));
    const std::string_view value = trim(term.substr(value_start));
    if (!is_label_name(value, true)) {
      bad_term("label", term, "invalid value \"" + std::string(value) + "\"");
    }
    requirement.values.emplace_back(value);
  } else {
    requirement.key = std::string(term);
    requirement.op = SelectorOperator::kExists;
  }
  if (!is_label_key(requirement.key)) {
    bad_term("label", term, "invalid key \"" + requirement.key + "\"");
  }
  return requirement;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string result;
  for (const std::string& part : parts) {
    if (!result.empty()) result += separator;
    result += part;
  }
  return result;
}

}  // namespace

LabelSelector::LabelSelector(std::vector<LabelRequirement> requirements)
    : requirements_(std::move(requirements)) {}

LabelSelector LabelSelector::parse(std::string_view text) {
  std::vector<LabelRequirement> requirements;
  if (trim(text).empty()) return LabelSelector();
  for (std::string_view term : split_terms(text)) {
    const std::string_view trimmed = trim(term);
    if (trimmed.empty()) bad_term("label", term, "empty term");
    if (std::count(trimmed.begin(), trimmed.end(), '(') !=
        std::count(trimmed.begin(), trimmed.end(), ')')) {
      bad_term("label", trimmed, "unbalanced parentheses");
    }
    requirements.push_back(parse_label_term(trimmed));
  }
  return LabelSelector(std::move(requirements));
}

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
  return std::all_of(requirements_.begin(), requirements_.end(), [&](const LabelRequirement& r) {
    const auto it = labels.find(r.key);
    const bool present = it != labels.end();
    const auto in_values = [&] {
      return present && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    };
    switch (r.op) {
      case SelectorOperator::kEquals:
      case SelectorOperator::kIn:
        return in_values();
      case SelectorOperator::kNotEquals:
      case SelectorOperator::kNotIn:
        return !in_values();  // an absent label satisfies != and notin
      case SelectorOperator::kExists:
        return present;
      case SelectorOperator::kDoesNotExist:
        return !present;
    }
    return false;
  });
}

bool LabelSelector::matches(const json& obj) const { return matches(object_labels(obj)); }

std::string LabelSelector::to_string() const {
  std::vector<std::string> terms;
  for (const LabelRequirement& r : requirements_) {
    switch (r.op) {
      case SelectorOperator::kEquals:
        terms.push_back(r.key + "=" + r.values.at(0));
        break;
      case SelectorOperator::kNotEquals:
        terms.push_back(r.key + "!=" + r.values.at(0));
        break;
      case SelectorOperator::kIn:
        terms.push_back(r.key + " in (" + join(r.values, ",") + ")");
        break;
      case SelectorOperator::kNotIn:
        terms.push_back(r.key + " notin (" + join(r.values, ",") + ")");
        break;
      case SelectorOperator::kExists:
        terms.push_back(r.key);
        break;
      case SelectorOperator::kDoesNotExist:
        terms.push_back("!" + r.key);
        break;
    }
  }
  return join(terms, ",");
}

// --- field selectors ------------------------------------------------------------------------

namespace {

bool is_field_path(std::string_view field) {
  return !field.empty() && field.front() != '.' && field.back() != '.' &&
         field.find("..") == std::string_view::npos &&
         std::all_of(field.begin(), field.end(), [](char c) { return is_alnum(c) || c == '.'; });
}

// The value at a dotted path as the server compares it: strings as-is, other scalars in
// their JSON form, anything missing as "".
std::string field_value(const json& obj, std::string_view path) {
  const json* node = &obj;
  while (true) {
    const auto dot = path.find('.');
    if (!node->is_object()) return {};
    const auto it = node->find(path.substr(0, dot));
    if (it == node->end()) return {};
    node = &*it;
    if (dot == std::string_view::npos) break;
    path = path.substr(dot + 1);
  }
  if (node->is_string()) return node->get<std::string>();
  if (node->is_null() || node->is_structured()) return {};
  return node->dump();
}

}  // namespace

FieldSelector::FieldSelector(std::vector<FieldRequirement> requirements)
    : requirements_(std::move(requirements)) {}

FieldSelector FieldSelector::parse(std::string_view text) {
  std::vector<FieldRequirement> requirements;
  if (trim(text).empty()) return FieldSelector();
  for (std::string_view term : split_terms(text)) {
    term = trim(term);
    FieldRequirement requirement;
    std::size_t op = term.find("!=");
    std::size_t value_start = op + 2;
    if (op != std::string_view::npos) {
      requirement.equals = false;
    } else if (op = term.find('='); op != std::string_view::npos) {
      value_start = term.substr(op).starts_with("==") ? op + 2 : op + 1;
    } else {
      bad_term("field", term, "expected field=value or field!=value");
    }
    requirement.field = std::string(trim(term.substr(0, op)));
    requirement.value = std::string(trim(term.substr(value_start)));
    if (!is_field_path(requirement.field)) {
      bad_term("field", term, "invalid field \"" + requirement.field + "\"");
    }
    requirements.push_back(std::move(requirement));
  }
  return FieldSelector(std::move(requirements));
}

bool FieldSelector::matches(const json& obj) const {
  return std::all_of(requirements_.begin(), requirements_.end(), [&](const FieldRequirement& r) {
    return (field_value(obj, r.field) == r.value) == r.equals;
  });
}

std::string FieldSelector::to_string() const {
  std::vector<std::string> terms;
  for (const FieldRequirement& r : requirements_) {
    terms.push_back(r.field + (r.equals ? "=" : "!=") + r.value);
  }
  return join(terms, ",");
}

}  // namespace tessel::kube
