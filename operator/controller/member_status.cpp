#include "operator/controller/member_status.h"

#include <set>

#include "api/label_selector.h"
#include "api/link_annotations.h"
#include "operator/controller/candidate_nodes.h"

namespace tessel::controller {

using nlohmann::json;

namespace {

std::string name_of(const json& node) {
  return node.value("metadata", json::object()).value("name", "");
}

bool usable_gpu_node(const json& node) {
  return node_gpu_allocatable(node) > 0 && node_ready(node) &&
         !node.value("spec", json::object()).value("unschedulable", false);
}

// The peers a node's annotation measured; none when it has none or it does not parse.
std::set<std::string> measured_peers(const json& node) {
  const json annotations = node.value("metadata", json::object()).value("annotations", json());
  if (!annotations.is_object() || !annotations.contains(api::kLinksAnnotation) ||
      !annotations[api::kLinksAnnotation].is_string())
    return {};
  try {
    std::set<std::string> peers;
    for (const auto& [peer, measurement] :
         api::parse_node_links(annotations[api::kLinksAnnotation].get<std::string>(), name_of(node))
             .peers)
      peers.insert(peer);
    return peers;
  } catch (const std::exception&) {
    return {};  // a bad annotation measures nothing (the placement flags it for the job)
  }
}

}  // namespace

std::string MemberCounts::probe_coverage() const {
  return std::to_string(measured_pairs) + "/" + std::to_string(pairs);
}

std::vector<std::string> usable_gpu_nodes(const std::vector<json>& nodes) {
  std::vector<std::string> names;
  for (const json& node : nodes)
    if (usable_gpu_node(node)) names.push_back(name_of(node));
  return names;
}

MemberCounts count_member(const std::string& cluster, const std::vector<json>& nodes,
                          const std::vector<json>& pods,
                          const std::map<std::string, std::vector<std::string>>& elsewhere) {
  MemberCounts counts;
  std::vector<const json*> usable;
  for (const json& node : nodes) {
    if (!usable_gpu_node(node)) continue;
    usable.push_back(&node);
    ++counts.nodes;
    counts.gpus_total += node_gpu_allocatable(node);
  }
  counts.gpus_free = candidate_nodes(cluster, "", nodes, pods, api::LabelSelector{}).free_gpus();

  // Every other usable GPU node, as a peer of this member's nodes names it.
  std::set<std::string> here;
  for (const json* node : usable) here.insert(name_of(*node));
  std::set<std::string> remote;
  for (const auto& [member, names] : elsewhere) {
    if (member == cluster) continue;
    for (const std::string& name : names) remote.insert(member + "/" + name);
  }
  for (const json* node : usable) {
    const std::string self = name_of(*node);
    counts.pairs += static_cast<int>(here.size() - 1 + remote.size());
    std::set<std::string> measured;  // "<node>" for this member's nodes, else "<member>/<node>"
    for (const std::string& peer : measured_peers(*node)) {
      if (api::is_aggregate(peer)) {  // the peers of a site not listed by name
        const std::string site = peer == "*" ? "" : peer.substr(0, peer.size() - 1);
        if (site.empty()) {
          for (const std::string& local : here)
            if (local != self) measured.insert(local);
        } else {
          for (const std::string& other : remote)
            if (other.starts_with(site)) measured.insert(other);
        }
        continue;
      }
      const std::string local =
          peer.starts_with(cluster + "/") ? peer.substr(cluster.size() + 1) : peer;
      if (local != self && here.count(local)) measured.insert(local);
      if (remote.count(peer)) measured.insert(peer);
    }
    counts.measured_pairs += static_cast<int>(measured.size());
  }
  return counts;
}

}  // namespace tessel::controller
