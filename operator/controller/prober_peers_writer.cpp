#include "operator/controller/prober_peers_writer.h"

#include "api/prober_peers.h"
#include "kube/api_error.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "operator/controller/labels.h"
#include "operator/controller/prober_peers.h"

namespace tessel::controller {

using nlohmann::json;

namespace {

const kube::ResourceInfo& configmaps() {
  static const kube::ResourceInfo info = *kube::ResourceRegistry().find_resource("", "configmaps");
  return info;
}

// Why `live` is not this hub's operator's to change ("" when it is).
std::string not_ours(const json& live, const std::string& hub_id) {
  const std::optional<std::string> managed_by = kube::get_label(live, kManagedByLabel);
  if (managed_by != kManagedByOperator) {
    return std::string("its label ") + kManagedByLabel + " is " +
           (managed_by ? "'" + *managed_by + "'" : "missing") + ", not '" + kManagedByOperator +
           "'";
  }
  const std::optional<std::string> hub = kube::get_label(live, kHubLabel);
  if (hub != hub_id) {
    return std::string("its label ") + kHubLabel + " is " + (hub ? "'" + *hub + "'" : "missing") +
           ": another hub's, not '" + hub_id + "'";
  }
  return "";
}

}  // namespace

PeersWriteResult write_prober_peers(kube::Client& member, const json& desired) {
  const std::string ns = kube::object_namespace(desired), name = kube::object_name(desired);
  const std::string hub_id = kube::get_label(desired, kHubLabel).value_or("");
  const json& text = desired.at("data").at(api::kProberPeersKey);
  for (int attempt = 0;; ++attempt) {
    json live;
    try {
      live = member.get(configmaps(), ns, name);
    } catch (const kube::ApiError& e) {
      if (!e.is_not_found()) throw;
      try {
        member.create(configmaps(), ns, desired);
        return {PeersWrite::kCreated, ""};
      } catch (const kube::ApiError& create_error) {
        // Made by someone in between: look again.
        if (!create_error.is_already_exists() || attempt >= kPeersWriteConflictRetries) throw;
        continue;
      }
    }
    if (std::string why = not_ours(live, hub_id); !why.empty())
      return {PeersWrite::kNotOurs, std::move(why)};
    const json data = live.value("data", json::object());
    if (data.is_object() && data.value(api::kProberPeersKey, json()) == text)
      return {PeersWrite::kUnchanged, ""};
    if (!live["data"].is_object()) live["data"] = json::object();
    live["data"][api::kProberPeersKey] = text;
    try {
      member.update(configmaps(), live);
      return {PeersWrite::kUpdated, ""};
    } catch (const kube::ApiError& e) {
      if (!e.is_conflict() || attempt >= kPeersWriteConflictRetries) throw;
    }
  }
}

}  // namespace tessel::controller
