#include "api/link_annotations.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "api/manifest_error.h"
#include "placement/limits.h"

namespace tessel::api {
namespace {

using nlohmann::json;

const std::string kField = std::string("metadata.annotations[") + kLinksAnnotation + "]";

// "<node>" or "<cluster>/<node>": a DNS-1123 subdomain (a Node's name), optionally after a
// cluster's name (a MemberCluster's, also a subdomain).
bool valid_peer(const std::string& peer) {
  static const std::regex subdomain(
      "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  const size_t slash = peer.find('/');
  if (slash == std::string::npos) return peer.size() <= 253 && std::regex_match(peer, subdomain);
  const std::string cluster = peer.substr(0, slash), node = peer.substr(slash + 1);
  return cluster.size() <= 253 && node.size() <= 253 && std::regex_match(cluster, subdomain) &&
         std::regex_match(node, subdomain);
}

// A [first, second] pair of numbers, or an error (once per pair).
bool read_pair(const json& pair, double& first, double& second, const std::string& field,
               std::vector<FieldError>& errors) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_number()) {
    errors.push_back({field, "must be a list of two numbers, got " + pair.dump()});
    return false;
  }
  first = pair[0].get<double>();
  second = pair[1].get<double>();
  return true;
}

}  // namespace

NodeLinks parse_node_links(const std::string& value, const std::string& node) {
  if (value.size() > kMaxLinksAnnotationBytes) {
    throw ManifestError(
        node, {{kField, "is " + std::to_string(value.size()) + " bytes, more than the limit of " +
                            std::to_string(kMaxLinksAnnotationBytes)}});
  }
  const json document = json::parse(value, nullptr, false);
  if (document.is_discarded() || !document.is_object()) {
    throw ManifestError(node, {{kField, "is not a JSON object"}});
  }
  if (document.value("version", json()) != 1) {
    throw ManifestError(node, {{kField + ".version",
                                "must be 1, got " + document.value("version", json()).dump()}});
  }
  const json peers = document.value("peers", json());
  if (!peers.is_object()) throw ManifestError(node, {{kField + ".peers", "must be an object"}});
  if (peers.size() > static_cast<size_t>(placement::kMaxDevices)) {
    throw ManifestError(node, {{kField + ".peers", "lists " + std::to_string(peers.size()) +
                                                       " peers, more than the limit of " +
                                                       std::to_string(placement::kMaxDevices)}});
  }
  std::vector<FieldError> errors;
  NodeLinks links;
  const double max_rtt_ms = 2 * placement::kMaxLatencyMs;
  for (const auto& [peer, entry] : peers.items()) {
    const std::string at = kField + ".peers[" + peer + "]";
    if (!valid_peer(peer)) {
      errors.push_back({at, "not a node name or <cluster>/<node>"});
      continue;
    }
    if (!entry.is_object()) {
      errors.push_back({at, "must be an object"});
      continue;
    }
    for (const auto& [key, unused] : entry.items()) {
      if (key != "rttMs" && key != "gbps" && key != "at")
        errors.push_back({at + "." + key, "unknown field"});
    }
    LinkMeasurement m;
    const json rtt = entry.value("rttMs", json()), gbps = entry.value("gbps", json());
    const auto in_range = [&](double x, double lo, double hi, const std::string& field,
                              const std::string& unit) {
      if (!(x >= lo && x <= hi)) {
        errors.push_back({field, "must be in [" + placement::number_text(lo) + ", " +
                                     placement::number_text(hi) + "] " + unit + ", got " +
                                     placement::number_text(x)});
      }
    };
    if (read_pair(rtt, m.rtt_p50_ms, m.rtt_p90_ms, at + ".rttMs", errors)) {
      in_range(m.rtt_p50_ms, 0, max_rtt_ms, at + ".rttMs[0]", "ms");
      in_range(m.rtt_p90_ms, m.rtt_p50_ms, max_rtt_ms, at + ".rttMs[1]", "ms (and >= the median)");
    }
    if (read_pair(gbps, m.small_gbps, m.bulk_gbps, at + ".gbps", errors)) {
      in_range(m.small_gbps, placement::kMinBandwidthGbps, placement::kMaxBandwidthGbps,
               at + ".gbps[0]", "Gbit/s");
      in_range(m.bulk_gbps, placement::kMinBandwidthGbps, placement::kMaxBandwidthGbps,
               at + ".gbps[1]", "Gbit/s");
    }
    const json when = entry.value("at", json(""));
    if (!when.is_string() || when.get<std::string>().size() > 64) {
      errors.push_back({at + ".at", "must be an RFC 3339 time"});
    } else {
      m.measured_at = when.get<std::string>();
    }
    links.peers[peer] = m;
  }
  if (!errors.empty()) throw ManifestError(node, errors);
  return links;
}

std::string format_node_links(const NodeLinks& links) {
  json peers = json::object();
  for (const auto& [peer, m] : links.peers) {
    peers[peer] = {{"rttMs", {m.rtt_p50_ms, m.rtt_p90_ms}},
                   {"gbps", {m.small_gbps, m.bulk_gbps}},
                   {"at", m.measured_at}};
  }
  return json{{"version", 1}, {"peers", peers}}.dump();
}

}  // namespace tessel::api
