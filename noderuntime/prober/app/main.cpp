// tessel-prober: see noderuntime/prober/app/prober_daemon.h and docs/prober.md.
#include <algorithm>
#include <iostream>
#include <memory>
#include <stop_token>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/log.h"
#include "kube/termination_signals.h"
#include "noderuntime/prober/app/prober_daemon.h"
#include "noderuntime/prober/app/prober_flags.h"
#include "noderuntime/prober/node_annotator.h"

namespace {

using namespace tessel;

prober::ProberDaemonOptions daemon_options(const prober::ProberFlags& flags,
                                           std::shared_ptr<const kube::Logger> logger) {
  prober::ProberDaemonOptions options;
  options.node_name = flags.node_name;
  options.namespace_name = flags.namespace_name;
  options.peer_selector = flags.peer_selector;
  options.peers_configmap = flags.peers_configmap;
  options.listen_host = flags.listen_host;
  options.listen_port = flags.listen_port;
  options.probe.secret = prober::read_probe_secret(flags.secret_file);
  options.probe.link_capacity_gbps = flags.link_capacity_gbps;
  options.schedule.budget_fraction = flags.budget;
  options.schedule.check_interval = flags.check_interval;
  options.schedule.refresh_interval = flags.refresh_interval;
  options.schedule.min_full_interval =
      std::min(options.schedule.min_full_interval, flags.refresh_interval);
  options.book.peer_ttl = flags.peer_ttl;
  options.book.max_listed_peers = flags.max_listed_peers;
  options.emulated_links = flags.emulated_links;
  options.logger = std::move(logger);
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  prober::ProberFlags flags;
  try {
    if (!prober::parse_prober_flags(argc, argv, flags)) return 0;
  } catch (const std::exception& e) {
    std::cerr << "tessel-prober: " << e.what() << "\n(see tessel-prober --help)\n";
    return 2;
  }
  const std::stop_source stop = kube::stop_on_termination_signals();
  try {
    auto logger = std::make_shared<const kube::Logger>("tessel-prober",
                                                       kube::parse_log_level(flags.log_level));
    prober::ProberDaemonOptions options = daemon_options(flags, logger);
    kube::ClientOptions client_options;
    client_options.user_agent = "tessel-prober";
    client_options.field_manager = prober::kProberFieldManager;
    client_options.request_timeout = std::chrono::seconds(30);  // a hung API server: retried
    client_options.logger = logger;
    const auto client =
        kube::Client::from_config(kube::load_default_config(flags.kubeconfig), client_options);
    prober::ProberDaemon daemon(*client, std::move(options));
    daemon.run(stop.get_token());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tessel-prober: " << e.what() << "\n";
    return 1;
  }
}
