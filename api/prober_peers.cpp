#include "api/prober_peers.h"

#include <arpa/inet.h>

#include <algorithm>
#include <map>

#include "api/manifest_error.h"
#include "api/manifest_text.h"

namespace tessel::api {
namespace {

using nlohmann::json;

const std::string kField = std::string("data[") + kProberPeersKey + "]";

// describe_json_value, but a number as JSON writes it, a boolean by its value, and any list by
// its size.
std::string describe(const json& value) {
  if (value.is_number() || value.is_boolean()) return value.dump();
  if (value.is_array()) return "a list of " + std::to_string(value.size()) + " items";
  return describe_json_value(value);
}

bool is_ip_address(const std::string& text) {
  unsigned char address[16];
  return inet_pton(AF_INET, text.c_str(), address) == 1 ||
         inet_pton(AF_INET6, text.c_str(), address) == 1;
}

// Why `host` is not an IP address or a DNS name, "" when it is one.
std::string bad_host(const json& host) {
  if (!host.is_string()) return "must be a string, got " + describe(host);
  const std::string& text = host.get_ref<const std::string&>();
  if (text.empty()) return "must not be empty";
  if (text.size() > 253) {
    return "is " + std::to_string(text.size()) + " bytes, more than a DNS name's 253";
  }
  if (is_ip_address(text) || is_dns_subdomain(text)) return "";
  return "must be an IP address or a DNS name (lowercase letters, digits, '-' and '.'), got " +
         describe(host);
}

// Why `name` is not "<cluster>/<node>" of a cluster other than `cluster`, "" when it is.
std::string bad_peer_name(const json& name, const std::string& cluster) {
  if (!name.is_string()) return "must be a string, got " + describe(name);
  const std::string& text = name.get_ref<const std::string&>();
  const size_t slash = text.find('/');
  if (slash == std::string::npos || !is_dns_subdomain(text.substr(0, slash)) ||
      !is_dns_subdomain(text.substr(slash + 1))) {
    return "must be <cluster>/<node>, each a DNS name (lowercase, at most 253), got " +
           describe(name);
  }
  if (text.substr(0, slash) == cluster) {
    return "names a node of cluster " + cluster +
           " itself: its own probers are found through its API server, not listed";
  }
  return "";
}

}  // namespace

ProberPeers parse_prober_peers(const std::string& text, const std::string& source) {
  const json document = parse_json_object(text, kMaxProberPeersBytes, kField, source);
  const json& version = field_of(document, "version");
  if (version != 1) {
    throw ManifestError(source, {{kField + ".version", "must be 1, got " + describe(version)}});
  }
  std::vector<FieldError> errors;
  add_unknown_field_errors(document, {"version", "cluster", "peers"}, kField, errors);
  ProberPeers out;
  const json& cluster = field_of(document, "cluster");
  if (!cluster.is_string() || !is_dns_subdomain(cluster.get<std::string>())) {
    errors.push_back({kField + ".cluster",
                      "must be a MemberCluster's name (a DNS name: lowercase, at most 253), got " +
                          describe(cluster)});
  } else {
    out.cluster = cluster.get<std::string>();
  }
  const json& peers = field_of(document, "peers");
  if (!peers.is_array()) {
    errors.push_back({kField + ".peers", "must be a list, got " + describe(peers)});
    throw ManifestError(source, errors);
  }
  if (peers.size() > kMaxProberPeers) {
    errors.push_back({kField + ".peers", "lists " + std::to_string(peers.size()) +
                                             " peers, more than the limit of " +
                                             std::to_string(kMaxProberPeers)});
    throw ManifestError(source, errors);
  }
  std::map<std::string, size_t> first_index;  // peer name -> where it was listed first
  size_t unreported = 0;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (errors.size() >= kMaxReportedFieldErrors) {
      ++unreported;
      continue;
    }
    const std::string at = kField + ".peers[" + std::to_string(i) + "]";
    const json& entry = peers[i];
    if (!entry.is_object()) {
      errors.push_back({at, "must be an object, got " + describe(entry)});
      continue;
    }
    add_unknown_field_errors(entry, {"name", "host", "port"}, at, errors);
    ProberPeer peer;
    const json& name = field_of(entry, "name");
    if (const std::string why = bad_peer_name(name, out.cluster); !why.empty()) {
      errors.push_back({at + ".name", why});
    } else {
      peer.name = name.get<std::string>();
      const auto [it, fresh] = first_index.emplace(peer.name, i);
      if (!fresh) {
        errors.push_back({at + ".name", "\"" + shown_text(peer.name) +
                                            "\" is listed twice (also at " + kField + ".peers[" +
                                            std::to_string(it->second) + "])"});
      }
    }
    const json& host = field_of(entry, "host");
    if (const std::string why = bad_host(host); !why.empty()) {
      errors.push_back({at + ".host", why});
    } else {
      peer.host = host.get<std::string>();
    }
    const json& port = field_of(entry, "port");
    if (!port.is_number_integer()) {
      errors.push_back({at + ".port", "must be a whole number in 1..65535, got " + describe(port)});
    } else if (port.get<int64_t>() < 1 || port.get<int64_t>() > 65535) {
      errors.push_back({at + ".port", "must be in 1..65535, got " + describe(port)});
    } else {
      peer.port = static_cast<uint16_t>(port.get<int64_t>());
    }
    out.peers.push_back(std::move(peer));
  }
  if (unreported > 0) {
    errors.push_back({kField + ".peers", "and " + std::to_string(unreported) +
                                             " more peers not checked after " +
                                             std::to_string(kMaxReportedFieldErrors) + " errors"});
  }
  if (!errors.empty()) throw ManifestError(source, errors);
  std::sort(out.peers.begin(), out.peers.end(),
            [](const ProberPeer& a, const ProberPeer& b) { return a.name < b.name; });
  return out;
}

std::string format_prober_peers(const ProberPeers& peers) {
  std::vector<const ProberPeer*> sorted;
  for (const ProberPeer& peer : peers.peers) sorted.push_back(&peer);
  std::sort(sorted.begin(), sorted.end(),
            [](const ProberPeer* a, const ProberPeer* b) { return a->name < b->name; });
  json list = json::array();
  for (const ProberPeer* peer : sorted)
    list.push_back({{"name", peer->name}, {"host", peer->host}, {"port", peer->port}});
  // Keys in the order of the documented form (json sorts an object's keys).
  return "{\"version\":1,\"cluster\":" + json(peers.cluster).dump() + ",\"peers\":" + list.dump() +
         "}";
}

std::vector<ProberEndpoint> prober_endpoints(const std::vector<json>& pods) {
  // node -> (creationTimestamp, pod name) of the pod chosen so far, and its endpoint
  std::map<std::string, std::pair<std::pair<std::string, std::string>, ProberEndpoint>> by_node;
  for (const json& pod : pods) {
    const json& metadata = field_of(pod, "metadata");
    const json& spec = field_of(pod, "spec");
    const json& status = field_of(pod, "status");
    if (!metadata.is_object() || !spec.is_object() || !status.is_object()) continue;
    if (!field_of(metadata, "deletionTimestamp").is_null()) continue;
    const json& phase = field_of(status, "phase");
    const json& node = field_of(spec, "nodeName");
    const json& ip = field_of(status, "podIP");
    if (phase != "Running" || !node.is_string() || node.get_ref<const std::string&>().empty() ||
        !ip.is_string() || ip.get_ref<const std::string&>().empty())
      continue;
    int64_t port = 0;
    const json& containers = field_of(spec, "containers");
    if (!containers.is_array()) continue;
    for (const json& container : containers) {
      const json& ports = field_of(container, "ports");
      if (!ports.is_array()) continue;
      for (const json& p : ports) {
        if (field_of(p, "name") != kProbePortName) continue;
        const json &host_port = field_of(p, "hostPort"),
                   &container_port = field_of(p, "containerPort");
        if (host_port.is_number_integer() && host_port.get<int64_t>() > 0) {
          port = host_port.get<int64_t>();
        } else if (container_port.is_number_integer()) {
          port = container_port.get<int64_t>();
        }
      }
    }
    if (port < 1 || port > 65535) continue;
    const json& created = field_of(metadata, "creationTimestamp");
    const json& name = field_of(metadata, "name");
    std::pair<std::string, std::string> age{created.is_string() ? created.get<std::string>() : "",
                                            name.is_string() ? name.get<std::string>() : ""};
    ProberEndpoint endpoint{node.get<std::string>(), ip.get<std::string>(),
                            static_cast<uint16_t>(port)};
    const std::string key = endpoint.node;
    const auto it = by_node.find(key);
    if (it == by_node.end() || it->second.first < age)
      by_node[key] = {std::move(age), std::move(endpoint)};
  }
  std::vector<ProberEndpoint> out;
  for (auto& [node, chosen] : by_node) out.push_back(std::move(chosen.second));
  return out;
}

}  // namespace tessel::api
