#include "operator/app/operator_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "api/manifest_text.h"
#include "kube/object.h"

namespace tessel::app {

std::pair<std::string, int> split_address(const std::string& address, const std::string& flag) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw std::invalid_argument(flag + ": '" + address + "' is not HOST:PORT");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  for (char c : address.substr(colon + 1)) {
    if (c < '0' || c > '9' || port > 65535) {
      throw std::invalid_argument(flag + ": '" + address + "' has no port number after ':'");
    }
    port = port * 10 + (c - '0');
  }
  if (port > 65535) {
    throw std::invalid_argument(flag + ": port " + std::to_string(port) + " is over 65535");
  }
  return {host, port};
}

namespace {

bool is_lower_alphanumeric(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A namespace name: a DNS-1123 label.
void check_namespace(const std::string& name, const std::string& flag) {
  if (name.empty()) return;
  const bool ok = name.size() <= 63 && is_lower_alphanumeric(name.front()) &&
                  is_lower_alphanumeric(name.back()) &&
                  std::all_of(name.begin(), name.end(),
                              [](char c) { return is_lower_alphanumeric(c) || c == '-'; });
  if (!ok) {
    throw std::invalid_argument(flag + ": '" + name +
                                "' is not a namespace name (at most 63 lowercase letters, digits "
                                "and '-', starting and ending with a letter or digit)");
  }
}

// key=value terms: the keys and values of labels, which the API server also checks.
void check_member_selector(const std::string& selector) {
  if (selector.empty()) return;
  size_t start = 0;
  while (start <= selector.size()) {
    const size_t comma = std::min(selector.find(',', start), selector.size());
    const std::string term = selector.substr(start, comma - start);
    const size_t equals = term.find('=');
    const std::string key = equals == std::string::npos ? "" : term.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : term.substr(equals + 1);
    const auto label_chars = [](const std::string& text, const char* extra) {
      return std::all_of(text.begin(), text.end(), [&](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::strchr(extra, c) != nullptr;
      });
    };
    if (key.empty() || key.size() > 316 || !label_chars(key, "-_./") || value.size() > 63 ||
        !label_chars(value, "-_.")) {
      throw std::invalid_argument("--member-selector: '" + term +
                                  "' is not key=value with a label's key and value");
    }
    start = comma + 1;
  }
}

void check_prober_selector(const std::string& selector) {
  try {
    kube::LabelSelector::parse(selector);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--prober-selector: '" + selector +
                                "' is not a label selector: " + e.what());
  }
}

}  // namespace

bool parse_operator_flags(int argc, char** argv, OperatorFlags& f) {
  CLI::App app{
      "tessel-operator: runs TrainingJobs (tessel.dev/v1alpha1) of the hub cluster on the GPUs of "
      "its member clusters. It watches TrainingJobs and MemberClusters in the hub and the Nodes "
      "and tessel pods of every member, places each job's pipeline stages x data-parallel "
      "replicas with the evolutionary search over the prober's measured links, creates the "
      "stage pods all-or-nothing, serves their rendezvous and progress (gRPC over TLS), and "
      "keeps each job's status. It also serves the admission webhooks (/validate, /mutate), "
      "/metrics, /healthz and /readyz over HTTPS. See docs/operator.md.",
      "tessel-operator"};
  app.option_defaults()->always_capture_default();
  app.add_option("--kubeconfig", f.kubeconfig,
                 "Kubeconfig of the hub cluster; empty: $KUBECONFIG, ~/.kube/config, else the "
                 "pod's service account (in-cluster)");
  app.add_option("--namespace", f.namespace_name,
                 "The operator's namespace in the hub: the MemberClusters' kubeconfig Secrets and "
                 "the leader-election Lease live there");
  app.add_option("--hub-id", f.hub_id,
                 "Names this hub on everything it creates in member clusters (label "
                 "tessel.dev/hub): two hubs sharing a member never touch each other's pods");
  app.add_option("--watch-namespace", f.watch_namespace,
                 "Only the TrainingJobs of this namespace; empty: every namespace (several "
                 "operators can share a hub, one namespace each)");
  app.add_option("--member-selector", f.member_selector,
                 "Only the MemberClusters with these labels (key=value, comma-separated); "
                 "empty: every MemberCluster");
  app.add_option("--prober-namespace", f.prober_namespace,
                 "The probers' namespace in every member cluster: their pods are found there, "
                 "and the operator keeps the ConfigMap tessel-prober-peers there (the probers of "
                 "the other members, for cross-cluster probes)");
  app.add_option("--prober-selector", f.prober_selector,
                 "The prober pods' labels (a label selector: key=value, key!=value, key in (a,b), "
                 "...)");
  app.add_option("--leader-elect", f.leader_elect,
                 "Run the controllers only while holding the Lease (true for more than one "
                 "replica)");
  app.add_option("--lease-name", f.lease_name, "The leader-election Lease's name");
  app.add_option("--lease-duration", f.lease_duration_s,
                 "Seconds a non-leader waits after the Lease last changed before taking it")
      ->check(CLI::Range(2, 3600));
  app.add_option("--renew-deadline", f.renew_deadline_s,
                 "Seconds the leader keeps trying to renew before it gives up and exits")
      ->check(CLI::Range(1, 3600));
  app.add_option("--retry-period", f.retry_period_s, "Seconds between Lease renewals and attempts")
      ->check(CLI::Range(1, 3600));
  app.add_option("--identity", f.identity,
                 "This replica's identity in the Lease; empty: the hostname and a random suffix");
  app.add_option("--pod-name", f.pod_name,
                 "This replica's Pod in --namespace (set POD_NAME from metadata.name): while it "
                 "leads and serves the stage service, the Pod carries the label "
                 "tessel.dev/stage-service=serving, which the stage Service selects, and no other "
                 "Pod of --namespace does; empty: no label (one replica without a Service)")
      ->envname("POD_NAME");
  app.add_option("--https-address", f.https_address,
                 "HOST:PORT of the HTTPS server: /validate, /mutate, /metrics, /healthz, /readyz");
  app.add_option("--tls-cert-file", f.tls_cert_file,
                 "PEM certificate (chain) of the HTTPS server and the stage service; its SANs must "
                 "name the webhook Service and --stage-service-advertise's host")
      ->required();
  app.add_option("--tls-key-file", f.tls_key_file, "PEM private key of --tls-cert-file")
      ->required();
  app.add_option(
         "--tls-ca-file", f.tls_ca_file,
         "PEM CA that signed --tls-cert-file; put in each job's member Secret so stage pods "
         "verify the stage service")
      ->required();
  app.add_option("--stage-service-address", f.stage_service_address,
                 "HOST:PORT the stage service (rendezvous and progress, gRPC over TLS) listens on");
  app.add_option("--stage-service-advertise", f.stage_service_advertise,
                 "HOST:PORT stage pods in every member cluster dial to reach the stage service "
                 "(e.g. a LoadBalancer's address)")
      ->required();
  app.add_option("--stage-image", f.stage_image,
                 "Image of the stage pods when a job's spec.template sets none");
  app.add_option("--data-root", f.data_root,
                 "Where a relative spec.data.text.path resolves inside the stage pods (the stage "
                 "image ships examples/ under /usr/share/tessel)");
  app.add_option("--workers", f.workers, "TrainingJobs reconciled at once")
      ->check(CLI::Range(1, 64));
  app.add_option("--status-interval", f.status_interval_s,
                 "Least seconds between two progress writes to one job's status")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--member-resync", f.member_resync_s,
                 "Seconds between two refreshes of a MemberCluster's status (node and GPU counts)")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--log-level", f.log_level, "debug, info, warning or error")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::cout << app.help();
    return false;
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument(e.what());
  }
  check_namespace(f.watch_namespace, "--watch-namespace");
  if (f.prober_namespace.empty())
    throw std::invalid_argument("--prober-namespace: must name a namespace");
  check_namespace(f.prober_namespace, "--prober-namespace");
  check_prober_selector(f.prober_selector);
  check_member_selector(f.member_selector);
  if (!f.pod_name.empty() && !api::is_dns_subdomain(f.pod_name)) {
    throw std::invalid_argument("--pod-name: '" + api::shown_text(f.pod_name) +
                                "' is not a Pod name (at most 253 characters: lowercase letters, "
                                "digits, '-' and '.', each '.'-separated part starting and "
                                "ending with a letter or digit)");
  }
  split_address(f.https_address, "--https-address");
  split_address(f.stage_service_address, "--stage-service-address");
  split_address(f.stage_service_advertise, "--stage-service-advertise");
  if (f.renew_deadline_s >= f.lease_duration_s) {
    throw std::invalid_argument("--renew-deadline (" + std::to_string(f.renew_deadline_s) +
                                " s) must be shorter than --lease-duration (" +
                                std::to_string(f.lease_duration_s) + " s)");
  }
  return true;
}

}  // namespace tessel::app
