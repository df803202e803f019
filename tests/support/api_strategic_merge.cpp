// Strategic merge patch (declared in api_patch.h). The patch strategies come from the Go types'
// `patchStrategy`/`patchMergeKey` tags of the fields tessel and kubectl touch.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "tests/support/api_patch.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

struct ListStrategy {
  std::string merge_key;  // "" for a list of primitives merged as a set
};

// Field paths (list elements written "[]") whose lists merge instead of being replaced.
const std::map<std::string, ListStrategy>& list_strategies(const std::string& kind) {
  static const std::map<std::string, ListStrategy> kMetadata = {
      {"metadata.finalizers", {""}}, {"metadata.ownerReferences", {"uid"}}};
  static const std::map<std::string, std::map<std::string, ListStrategy>> kByKind = [] {
    std::map<std::string, std::map<std::string, ListStrategy>> kinds;
    std::map<std::string, ListStrategy> pod = kMetadata;
    for (const std::string containers : {"containers", "initContainers", "ephemeralContainers"}) {
      const std::string base = "spec." + containers;
      pod[base] = {"name"};
      pod[base + "[].env"] = {"name"};
      pod[base + "[].ports"] = {"containerPort"};
      pod[base + "[].volumeMounts"] = {"mountPath"};
      pod[base + "[].volumeDevices"] = {"devicePath"};
    }
    pod["spec.volumes"] = {"name"};
    pod["spec.imagePullSecrets"] = {"name"};
    pod["spec.hostAliases"] = {"ip"};
    pod["spec.topologySpreadConstraints"] = {"topologyKey"};
    pod["spec.resourceClaims"] = {"name"};
    pod["status.conditions"] = {"type"};
    pod["status.podIPs"] = {"ip"};
    pod["status.hostIPs"] = {"ip"};
    kinds["Pod"] = pod;

    std::map<std::string, ListStrategy> node = kMetadata;
    node["spec.podCIDRs"] = {""};
    node["status.conditions"] = {"type"};
    node["status.addresses"] = {"type"};
    kinds["Node"] = node;

    std::map<std::string, ListStrategy> service = kMetadata;
    service["spec.ports"] = {"port"};
    service["status.conditions"] = {"type"};
    kinds["Service"] = service;

    std::map<std::string, ListStrategy> namespace_ = kMetadata;
    namespace_["status.conditions"] = {"type"};
    kinds["Namespace"] = namespace_;

    std::map<std::string, ListStrategy> service_account = kMetadata;
    service_account["secrets"] = {"name"};
    service_account["imagePullSecrets"] = {"name"};
    kinds["ServiceAccount"] = service_account;

    for (const std::string configuration :
         {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}) {
      std::map<std::string, ListStrategy> webhooks = kMetadata;
      webhooks["webhooks"] = {"name"};
      kinds[configuration] = webhooks;
    }
    return kinds;
  }();
  const auto found = kByKind.find(kind);
  return found == kByKind.end() ? kMetadata : found->second;
}

constexpr std::string_view kDeleteFromPrimitiveList = "$deleteFromPrimitiveList/";
constexpr std::string_view kSetElementOrder = "$setElementOrder/";

class StrategicMerger {
 public:
  explicit StrategicMerger(const std::string& kind) : strategies_(list_strategies(kind)) {}

  // Returns nullopt when the patch deletes the whole map ($patch: delete).
  std::optional<json> merge_map(const json& original, const json& patch,
                                const std::string& path) const {
    if (!patch.is_object()) return patch;
    json result = original.is_object() ? original : json::object();
    if (const auto directive = patch.find("$patch"); directive != patch.end()) {
      const std::string value = directive->is_string() ? directive->get<std::string>() : "";
      if (value == "delete") return std::nullopt;
      if (value == "replace") {
        json replacement = patch;
        replacement.erase("$patch");
        return replacement;
      }
      if (value != "merge") throw PatchFormatError("Unknown patch type: " + value);
    }
    if (patch.contains("$retainKeys")) {
      throw PatchFormatError("the $retainKeys directive is not supported by this server");
    }
    for (const auto& [key, value] : patch.items()) {
      if (key == "$patch" || key.rfind(kSetElementOrder, 0) == 0) continue;
      if (key.rfind(kDeleteFromPrimitiveList, 0) == 0) {
        delete_from_list(result, key.substr(kDeleteFromPrimitiveList.size()), value);
        continue;
      }
      const std::string child = path.empty() ? key : path + "." + key;
      if (value.is_null()) {
        result.erase(key);
      } else if (value.is_object()) {
        std::optional<json> merged = merge_map(result.value(key, json()), value, child);
        if (merged) {
          result[key] = std::move(*merged);
        } else {
          result.erase(key);
        }
      } else if (value.is_array()) {
        result[key] = merge_list(result.value(key, json()), value, child);
      } else {
        result[key] = value;
      }
    }
    for (const auto& [key, order] : patch.items()) {
      if (key.rfind(kSetElementOrder, 0) != 0) continue;
      const std::string field = key.substr(kSetElementOrder.size());
      if (result.contains(field)) {
        order_list(result[field], order, path.empty() ? field : path + "." + field);
      }
    }
    return result;
  }

 private:
  const ListStrategy* strategy(const std::string& path) const {
    const auto found = strategies_.find(path);
    return found == strategies_.end() ? nullptr : &found->second;
  }

  json merge_list(const json& original, const json& patch, const std::string& path) const {
    const ListStrategy* list = strategy(path);
    for (const json& element : patch) {
      if (element.is_object() && element.value("$patch", "") == "replace") {
        json replacement = json::array();
        for (const json& kept : patch) {
          if (!(kept.is_object() && kept.contains("$patch"))) replacement.push_back(kept);
        }
        return replacement;
      }
    }
    if (!list || !original.is_array()) return strip_directives(patch);
    json result = original;
    if (list->merge_key.empty()) {
      for (const json& element : patch) {
        if (std::find(result.begin(), result.end(), element) == result.end()) {
          result.push_back(element);
        }
      }
      return result;
    }
    const std::string& key = list->merge_key;
    for (const json& element : patch) {
      if (!element.is_object() || !element.contains(key)) {
        throw PatchFormatError("map: " + element.dump() +
                               " does not contain declared merge key: " + key);
      }
      const auto match = std::find_if(result.begin(), result.end(), [&](const json& existing) {
        return existing.is_object() && existing.value(key, json()) == element[key];
      });
      if (element.value("$patch", "") == "delete") {
        if (match != result.end()) result.erase(match);
        continue;
      }
      if (match == result.end()) {
        result.push_back(strip_directives(element));
      } else {
        std::optional<json> merged = merge_map(*match, element, path + "[]");
        if (merged) {
          *match = std::move(*merged);
        } else {
          result.erase(match);
        }
      }
    }
    return result;
  }

  static json strip_directives(const json& value) {
    if (value.is_array()) {
      json result = json::array();
      for (const json& element : value) {
        if (element.is_object() && element.value("$patch", "") == "delete") continue;
        result.push_back(strip_directives(element));
      }
      return result;
    }
    if (!value.is_object()) return value;
    json result = json::object();
    for (const auto& [key, child] : value.items()) {
      if (key.rfind("$", 0) == 0) continue;
      if (!child.is_null()) result[key] = strip_directives(child);
    }
    return result;
  }

  static void delete_from_list(json& object, const std::string& field, const json& values) {
    if (!object.contains(field) || !object[field].is_array() || !values.is_array()) return;
    json kept = json::array();
    for (const json& element : object[field]) {
      if (std::find(values.begin(), values.end(), element) == values.end()) kept.push_back(element);
    }
    object[field] = kept;
  }

  // $setElementOrder: the listed elements first, in that order, then the others as they were.
  void order_list(json& list, const json& order, const std::string& path) const {
    if (!list.is_array() || !order.is_array()) return;
    const ListStrategy* strategy_of_list = strategy(path);
    const std::string key = strategy_of_list ? strategy_of_list->merge_key : "";
    auto identity = [&](const json& element) {
      return key.empty() || !element.is_object() ? element : element.value(key, json());
    };
    json ordered = json::array();
    std::set<std::size_t> used;
    for (const json& wanted : order) {
      const json wanted_identity = identity(wanted);
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (!used.count(i) && identity(list[i]) == wanted_identity) {
          ordered.push_back(list[i]);
          used.insert(i);
          break;
        }
      }
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!used.count(i)) ordered.push_back(list[i]);
    }
    list = ordered;
  }

  const std::map<std::string, ListStrategy>& strategies_;
};

}  // namespace

json strategic_merge_patch(const std::string& kind, const json& target, const json& patch) {
  if (!patch.is_object()) {
    throw PatchFormatError("a strategic merge patch must be a JSON object");
  }
  std::optional<json> merged = StrategicMerger(kind).merge_map(target, patch, "");
  if (!merged) throw PatchFormatError("a strategic merge patch may not delete the whole object");
  return *merged;
}

}  // namespace tessel::testing
