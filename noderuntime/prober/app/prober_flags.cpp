#include "noderuntime/prober/app/prober_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>

#include "api/link_annotations.h"
#include "api/manifest_text.h"
#include "api/prober_peers.h"
#include "kube/object.h"
#include "noderuntime/prober/app/flag_number.h"
#include "noderuntime/prober/link_book.h"
#include "noderuntime/prober/probe_auth.h"
#include "noderuntime/prober/probe_schedule.h"
#include "placement/limits.h"

namespace tessel::prober {
namespace {

std::string seconds_text(std::chrono::seconds s) { return std::to_string(s.count()) + "s"; }

void check_node_name(const std::string& name) {
  if (name.empty()) {
    throw std::invalid_argument(
        "--node-name: empty and $NODE_NAME is unset (the DaemonSet sets it from spec.nodeName)");
  }
  if (!api::is_dns_subdomain(name)) {
    throw std::invalid_argument("--node-name: '" + name +
                                "' is not a Node name (a DNS subdomain: at most 253 lowercase "
                                "letters, digits, '-' and '.')");
  }
}

void check_namespace(const std::string& name) {
  if (!placement::dns1123_label_violation(name).empty()) {
    throw std::invalid_argument("--namespace: '" + name +
                                "' is not a namespace name (at most 63 lowercase letters, digits "
                                "and '-', starting and ending with a letter or digit)");
  }
}

void check_configmap_name(const std::string& name) {
  if (!api::is_dns_subdomain(name)) {
    throw std::invalid_argument("--peers-configmap: '" + name +
                                "' is not a ConfigMap name (a DNS subdomain: at most 253 "
                                "lowercase letters, digits, '-' and '.')");
  }
}

void check_peer_selector(const std::string& selector) {
  if (selector.empty()) {
    throw std::invalid_argument(
        "--peer-selector: empty (it would take every pod of the namespace for a prober)");
  }
  try {
    kube::LabelSelector::parse(selector);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--peer-selector: '" + selector + "': " + e.what());
  }
}

std::pair<std::string, uint16_t> split_listen(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw std::invalid_argument("--listen: '" + address + "' is not HOST:PORT");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port_text = address.substr(colon + 1);
  if (port_text.size() > 5 || !std::all_of(port_text.begin(), port_text.end(),
                                           [](char c) { return c >= '0' && c <= '9'; })) {
    throw std::invalid_argument("--listen: '" + address + "' has no port number after ':'");
  }
  const int port = std::stoi(port_text);
  if (port < 1 || port > 65535) {
    throw std::invalid_argument("--listen: port " + port_text + " is outside 1..65535");
  }
  return {host, static_cast<uint16_t>(port)};
}

void check_seconds(const std::string& flag, std::chrono::seconds value, std::chrono::seconds low,
                   std::chrono::seconds high) {
  if (value < low || value > high) {
    throw std::invalid_argument(flag + ": " + seconds_text(value) + " is outside " +
                                seconds_text(low) + ".." + seconds_text(high));
  }
}

}  // namespace

std::string process_environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::chrono::seconds parse_duration(const std::string& text, const std::string& flag) {
  std::string number = text;
  double unit = 1;
  if (!number.empty()) {
    switch (number.back()) {
      case 's':
        number.pop_back();
        break;
      case 'm':
        unit = 60;
        number.pop_back();
        break;
      case 'h':
        unit = 3600;
        number.pop_back();
        break;
      default:
        break;
    }
  }
  const std::optional<double> value = parse_flag_number(number);
  const double seconds = value ? *value * unit : -1;
  if (!value || seconds < 0 || seconds > 1e9 || seconds != std::floor(seconds)) {
    throw std::invalid_argument(flag + ": '" + text +
                                "' is not a duration (whole seconds: 90, 90s, 20m, 1h)");
  }
  return std::chrono::seconds(static_cast<int64_t>(seconds));
}

std::string read_probe_secret(const std::string& path) {
  const std::string where = "--secret-file " + path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error(where + ": cannot read it (" + std::strerror(errno) +
                             "); mount the prober's Secret there");
  }
  // One byte past the limit is enough to know it is too long.
  std::string secret(kMaxSecretBytes + 2, '\0');
  in.read(secret.data(), static_cast<std::streamsize>(secret.size()));
  if (in.bad()) throw std::runtime_error(where + ": read failed");
  secret.resize(static_cast<size_t>(in.gcount()));
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  try {
    check_probe_secret(secret, where);
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
  return secret;
}

bool parse_prober_flags(int argc, char** argv, ProberFlags& f, EnvironmentLookup environment) {
  f.node_name = environment("NODE_NAME");
  f.namespace_name = environment("POD_NAMESPACE");
  if (f.namespace_name.empty()) f.namespace_name = "tessel-system";
  f.peer_selector = api::kProberSelector;
  f.peers_configmap = api::kProberPeersConfigMap;
  std::string check_interval = seconds_text(f.check_interval);
  std::string refresh_interval = seconds_text(f.refresh_interval);
  std::string peer_ttl = seconds_text(f.peer_ttl);
  std::vector<std::string> emulate_links;

  CLI::App app{
      "tessel-prober: measures this node's links to its peer probers (round-trip time, "
      "small-message and bulk throughput, in this direction) and publishes them on its own Node "
      "as the annotation " +
          std::string(api::kLinksAnnotation) +
          ", which the tessel-operator's placement reads. Peers: the prober pods of its namespace "
          "in this cluster, and the other clusters' probers the operator lists in a ConfigMap. "
          "Runs as a DaemonSet, one pod per GPU node. It serves the probes of its peers on "
          "--listen (HMAC-authenticated by the shared secret). RBAC: get/list/watch pods and "
          "configmaps in its namespace, get and patch nodes (its own only). See docs/prober.md.",
      "tessel-prober"};
  app.option_defaults()->always_capture_default();
  app.add_option("--kubeconfig", f.kubeconfig,
                 "Kubeconfig of this cluster; empty: $KUBECONFIG, ~/.kube/config, else the pod's "
                 "service account (in-cluster)");
  app.add_option("--node-name", f.node_name,
                 "The Node this prober runs on and annotates (default: $NODE_NAME, set from "
                 "spec.nodeName); required");
  app.add_option("--namespace", f.namespace_name,
                 "Where the prober pods and the peers ConfigMap are (default: $POD_NAMESPACE, "
                 "else tessel-system)");
  app.add_option("--listen", f.listen,
                 "HOST:PORT this prober serves its peers' probes on; the pod's container port "
                 "named '" +
                     std::string(api::kProbePortName) + "' must name PORT");
  app.add_option("--secret-file", f.secret_file,
                 "File holding the shared secret that authenticates probers to each other (" +
                     std::to_string(kMinSecretBytes) + " to " + std::to_string(kMaxSecretBytes) +
                     " bytes; a trailing newline is dropped), read at start");
  app.add_option("--peer-selector", f.peer_selector,
                 "Label selector of the prober pods in --namespace (this cluster's peers)");
  app.add_option("--peers-configmap", f.peers_configmap,
                 "ConfigMap in --namespace listing the other clusters' probers (key " +
                     std::string(api::kProberPeersKey) + ", written by the tessel-operator)");
  app.add_option("--budget", f.budget,
                 "Probe traffic to a peer over any hour, as a share of its measured bulk rate "
                 "(0 < budget <= " +
                     placement::number_text(kMaxBudgetFraction) + ")");
  app.add_option("--check-interval", check_interval,
                 "How often each peer's round-trip time is checked (pings only, a few KiB); a "
                 "drift triggers a full probe. Seconds, or with a unit: 90s, 2m, 1h (" +
                     seconds_text(kMinCheckInterval) + ".." + seconds_text(kMaxScheduleInterval) +
                     ")");
  app.add_option("--refresh-interval", refresh_interval,
                 "A full probe of each peer at least this often, the budget allowing (" +
                     seconds_text(kMinRefreshInterval) + ".." + seconds_text(kMaxScheduleInterval) +
                     ", not under --check-interval)");
  app.add_option("--peer-ttl", peer_ttl,
                 "A peer without a successful probe or check for this long is dropped from the "
                 "annotation (at least twice --check-interval, at most " +
                     seconds_text(kMaxPeerTtl) + ")");
  app.add_option("--max-listed-peers", f.max_listed_peers,
                 "Entries of the annotation, site aggregates included: the peers beyond are "
                 "aggregated by site (\"*\": this cluster's, \"<cluster>/*\": another's) (1.." +
                     std::to_string(kMaxListedPeers) + ")");
  app.add_option("--link-capacity-gbps", f.link_capacity_gbps,
                 "The fastest this node's links may be, in Gbit/s (its NIC's rate): a full probe "
                 "of a long fat link measures its bulk rate over the TCP streams that fill a "
                 "link this fast, as the transport opens them (" +
                     placement::number_text(placement::kMinBandwidthGbps) + ".." +
                     placement::number_text(placement::kMaxBandwidthGbps) + ")");
  app.add_option("--emulate-link", emulate_links,
                 "PREFIX=GBPS/MS, repeatable: shape this prober's sends to peers whose name starts "
                 "with PREFIX (the longest matching PREFIX wins) to GBPS Gbit/s (0: unlimited) "
                 "and MS milliseconds of added round-trip time, with the transport's link "
                 "emulator. For demos and tests on one machine; unset in production")
      ->take_all();
  app.add_option("--log-level", f.log_level, "debug, info, warning or error")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return false;
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument(e.what());
  }

  check_node_name(f.node_name);
  check_namespace(f.namespace_name);
  std::tie(f.listen_host, f.listen_port) = split_listen(f.listen);
  if (f.secret_file.empty()) throw std::invalid_argument("--secret-file: empty");
  check_peer_selector(f.peer_selector);
  check_configmap_name(f.peers_configmap);
  if (!(f.budget > 0) || f.budget > kMaxBudgetFraction) {
    throw std::invalid_argument("--budget: " + placement::number_text(f.budget) +
                                " is outside (0, " + placement::number_text(kMaxBudgetFraction) +
                                "]");
  }
  f.check_interval = parse_duration(check_interval, "--check-interval");
  f.refresh_interval = parse_duration(refresh_interval, "--refresh-interval");
  f.peer_ttl = parse_duration(peer_ttl, "--peer-ttl");
  check_seconds("--check-interval", f.check_interval, kMinCheckInterval, kMaxScheduleInterval);
  check_seconds("--refresh-interval", f.refresh_interval,
                std::max(kMinRefreshInterval, f.check_interval), kMaxScheduleInterval);
  check_seconds("--peer-ttl", f.peer_ttl, 2 * f.check_interval, kMaxPeerTtl);
  if (!(f.link_capacity_gbps >= placement::kMinBandwidthGbps &&
        f.link_capacity_gbps <= placement::kMaxBandwidthGbps)) {
    throw std::invalid_argument("--link-capacity-gbps: " +
                                placement::number_text(f.link_capacity_gbps) + " is outside " +
                                placement::number_text(placement::kMinBandwidthGbps) + ".." +
                                placement::number_text(placement::kMaxBandwidthGbps));
  }
  if (f.max_listed_peers < 1 || f.max_listed_peers > kMaxListedPeers) {
    throw std::invalid_argument("--max-listed-peers: " + std::to_string(f.max_listed_peers) +
                                " is outside 1.." + std::to_string(kMaxListedPeers));
  }
  std::set<std::string> prefixes;
  for (const std::string& text : emulate_links) {
    EmulatedLink link = parse_emulated_link(text);
    if (!prefixes.insert(link.prefix).second) {
      throw std::invalid_argument("--emulate-link: PREFIX '" + link.prefix + "' given twice");
    }
    f.emulated_links.push_back(std::move(link));
  }
  return true;
}

}  // namespace tessel::prober
