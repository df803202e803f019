#include "cli/kubectl_tessel/cluster_reads.h"

#include <algorithm>

#include "api/crds.h"
#include "cli/kubectl_tessel/plugin_error.h"
#include "kube/api_error.h"
#include "kube/base64.h"
#include "kube/config.h"
#include "kube/resource.h"

namespace tessel::kubectl_tessel {

using nlohmann::json;

namespace {

kube::ResourceInfo served(const json& crd) {
  return kube::parse_custom_resource_definition(crd).front();
}

kube::ResourceInfo builtin(const std::string& resource) {
  for (const kube::ResourceInfo& info : kube::builtin_resources()) {
    if (info.gvr.group.empty() && info.gvr.resource == resource) return info;
  }
  throw std::logic_error("no built-in resource " + resource);
}

std::string refusal(const kube::ApiError& e) {
  return std::to_string(e.code()) + " " + e.reason() + ": " + e.message();
}

// The member's kubeconfig from its Secret, checked as the operator checks it
// (operator/controller/member_connection.cpp): the same refusals, the same spec field to relax.
kube::ClusterConfig member_config(kube::Client& hub, const json& member,
                                  const std::string& operator_namespace) {
  const std::string cluster = member["metadata"].value("name", "");
  const json spec = member.value("spec", json::object());
  const json ref = spec.value("kubeconfigSecretRef", json::object());
  const std::string name = ref.value("name", ""), key = ref.value("key", "kubeconfig");
  const std::string where = "Secret " + operator_namespace + "/" + name;
  json secret;
  try {
    secret = hub.get(builtin("secrets"), operator_namespace, name);
  } catch (const kube::ApiError& e) {
    if (e.code() == 404) {
      throw PluginError(where + " (spec.kubeconfigSecretRef) not found; is the operator's " +
                        "namespace " + operator_namespace + "? (--operator-namespace)");
    }
    throw PluginError("reading " + where + ": " + refusal(e));
  }
  const json data = secret.value("data", json::object());
  if (!data.is_object() || !data.contains(key) || !data[key].is_string()) {
    throw PluginError(where + " has no key '" + key + "' (spec.kubeconfigSecretRef.key)");
  }
  const std::optional<std::string> text = kube::base64_decode(data[key].get<std::string>());
  if (!text) throw PluginError(where + "[" + key + "]: not valid base64");
  kube::KubeconfigBytesPolicy policy;
  policy.allow_insecure = spec.value("allowInsecureTLS", false);
  policy.allow_insecure_hint = "the MemberCluster " + cluster + " would need spec.allowInsecureTLS";
  return kube::kubeconfig_from_bytes(*text, where + "[" + key + "]", policy);
}

}  // namespace

json read_job(kube::Client& hub, const std::string& ns, const std::string& name) {
  try {
    return hub.get(served(api::trainingjob_crd()), ns, name);
  } catch (const kube::ApiError& e) {
    if (e.code() == 404 && !e.details_name().empty()) {
      throw PluginError("TrainingJob " + name + " not found in namespace " + ns +
                        " (-n/--namespace to look in another)");
    }
    if (e.code() == 404) {
      throw PluginError(
          "the hub serves no TrainingJobs (trainingjobs.tessel.dev): is tessel "
          "installed there? (" +
          refusal(e) + ")");
    }
    throw PluginError("reading TrainingJob " + ns + "/" + name + ": " + refusal(e));
  }
}

std::vector<MemberNodes> read_members(kube::Client& hub, const std::string& operator_namespace,
                                      const kube::ClientOptions& member_options) {
  std::vector<json> members;
  try {
    members = hub.list_all(served(api::membercluster_crd()), "").items;
  } catch (const kube::ApiError& e) {
    throw PluginError("listing MemberClusters in the hub: " + refusal(e));
  }
  if (members.empty()) {
    throw PluginError(
        "the hub has no MemberClusters (kubectl get memberclusters): no node to "
        "show");
  }
  std::vector<MemberNodes> out;
  for (const json& member : members) {
    MemberNodes read;
    read.cluster = member["metadata"].value("name", "");
    try {
      const kube::ClusterConfig config = member_config(hub, member, operator_namespace);
      const std::shared_ptr<kube::Client> client =
          kube::Client::from_config(config, member_options);
      read.nodes = client->list_all(builtin("nodes"), "").items;
    } catch (const kube::ApiError& e) {
      read.error = "listing its Nodes: " + refusal(e);
    } catch (const std::exception& e) {  // PluginError, KubeConfigError, transport errors
      read.error = e.what();
    }
    out.push_back(std::move(read));
  }
  return out;
}

}  // namespace tessel::kubectl_tessel
