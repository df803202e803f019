// The tessel-prober's command line: every flag, its default (some from the environment the
// DaemonSet sets through the Downward API), and the checks that refuse a bad value before
// anything starts (each error names the flag, the value and the limit).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "noderuntime/prober/app/emulated_link.h"

namespace tessel::prober {

// Lower limits of the interval flags (the upper ones are the schedule's and the link book's:
// probe_schedule.h, link_book.h). Under a second, checks would be most of what a link carries
// for a prober; a refresh under 10 s re-measures faster than a full probe's bulk phase settles.
inline constexpr std::chrono::seconds kMinCheckInterval{1};
inline constexpr std::chrono::seconds kMinRefreshInterval{10};

struct ProberFlags {
  std::string kubeconfig;      // empty: $KUBECONFIG, ~/.kube/config, else in-cluster
  std::string node_name;       // default $NODE_NAME; required
  std::string namespace_name;  // default $POD_NAMESPACE, else tessel-system
  std::string listen = "0.0.0.0:7471";
  std::string secret_file = "/etc/tessel-prober/secret";
  std::string peer_selector;    // default api::kProberSelector
  std::string peers_configmap;  // default api::kProberPeersConfigMap
  double budget = 0.01;
  std::chrono::seconds check_interval{60};
  std::chrono::seconds refresh_interval{1200};
  std::chrono::seconds peer_ttl{900};
  size_t max_listed_peers = 256;
  // The fastest this node's links may be (its NIC): the bulk phase's streams are chosen to fill
  // a link that fast at the measured round trip (ProbeOptions::link_capacity_gbps).
  double link_capacity_gbps = 10;
  std::vector<EmulatedLink> emulated_links;
  std::string log_level = "info";

  // --listen, split (checked by parse_prober_flags).
  std::string listen_host;
  uint16_t listen_port = 0;
};

// Parses argv, with defaults from `environment` lookups (NODE_NAME, POD_NAMESPACE; tests pass
// their own). Returns false after printing --help to stdout (exit 0); throws
// std::invalid_argument naming the flag, the value and the limit (the caller prints it and
// exits 2).
using EnvironmentLookup = std::string (*)(const char* name);  // "" when unset
std::string process_environment(const char* name);
bool parse_prober_flags(int argc, char** argv, ProberFlags& flags,
                        EnvironmentLookup environment = process_environment);

// A duration flag's value: seconds ("90"), or with a unit ("90s", "20m", "1h"). Throws
// std::invalid_argument naming `flag` and the value.
std::chrono::seconds parse_duration(const std::string& text, const std::string& flag);

// The shared secret in `path`: a trailing newline (as `kubectl create secret
// --from-file` keeps from an editor) is dropped. Throws std::runtime_error naming the file when
// it is missing, unreadable, too short or too long; the message never contains the secret.
std::string read_probe_secret(const std::string& path);

}  // namespace tessel::prober
