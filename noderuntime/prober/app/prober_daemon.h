// The tessel-prober daemon: one per GPU node. It
//  - serves its peers' probes (a ProbeServer on the listen address, one session at a time);
//  - finds its peers through the API server: informers on the prober pods of its namespace
//    (label selector) and on the peers ConfigMap the operator writes there (field selector
//    metadata.name); a ConfigMap that does not parse is logged, naming it, and the last good
//    peers are kept;
//  - measures them one at a time, as the ProbeSchedule plans (full probes and round-trip
//    checks, within the budget), the sends to a peer shaped by the longest matching
//    --emulate-link prefix; a peer that answers busy (it serves another prober's probe) is
//    tried again a moment later (kBusyRetryMin..kBusyRetryMax), which is no failure;
//  - keeps what it measured in a LinkBook (peers that stop answering age out; at start, what its
//    Node's annotation still holds of a previous run, when younger than peer_ttl) and patches its
//    own Node's links annotation when the change is material; a failed patch is logged and
//    retried with back-off, never fatal.
// Threads: the caller's (the loop, which runs the probes), the probe server's two (accepting,
// serving), one per informer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "api/link_annotations.h"
#include "api/prober_peers.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/log.h"
#include "noderuntime/prober/app/emulated_link.h"
#include "noderuntime/prober/link_book.h"
#include "noderuntime/prober/probe_client.h"
#include "noderuntime/prober/probe_schedule.h"
#include "noderuntime/prober/probe_server.h"
#include "noderuntime/transport/socket.h"

namespace tessel::prober {

// A busy peer is probed again after a pause drawn uniformly in this range: short, since its
// session ends within seconds, and jittered, so that the probers that found it busy together
// do not all come back at once.
inline constexpr std::chrono::milliseconds kBusyRetryMin{1000};
inline constexpr std::chrono::milliseconds kBusyRetryMax{3000};

struct ProberDaemonOptions {
  std::string node_name;  // the Node it runs on and annotates
  std::string namespace_name = "tessel-system";
  std::string peer_selector = api::kProberSelector;
  std::string peers_configmap = api::kProberPeersConfigMap;
  std::string listen_host = "0.0.0.0";
  uint16_t listen_port = api::kDefaultProbePort;  // 0: any free port (tests)
  // The probes: secret and sizes. self_name is node_name; max_bytes of a full probe and
  // emulated_link are set per probe.
  ProbeOptions probe;
  ProbeServerOptions server;  // its secret is probe.secret
  ScheduleOptions schedule;
  LinkBookOptions book;
  std::vector<EmulatedLink> emulated_links;
  // What to publish is looked at again at least this often (aging out is a matter of time).
  std::chrono::milliseconds reevaluate_every{1000};
  // A failed Node patch is retried after this, doubling up to publish_retry_max.
  std::chrono::milliseconds publish_retry_initial{1000};
  std::chrono::milliseconds publish_retry_max{60'000};
  std::shared_ptr<const kube::Logger> logger;  // nullptr: component "tessel-prober" on stderr
};

class ProberDaemon {
 public:
  // Checks the options (the probe, server, schedule and link book checks: ProbeError naming
  // the option) and binds the listen address (TransportError naming it). The client must
  // outlive the daemon.
  ProberDaemon(kube::Client& client, ProberDaemonOptions options);
  ProberDaemon(const ProberDaemon&) = delete;
  ProberDaemon& operator=(const ProberDaemon&) = delete;

  // The port the probe server listens on (the bound one when listen_port is 0).
  uint16_t port() const { return port_; }

  // Serves, watches, probes and publishes until `stop`; call once. A probe in progress is
  // finished first (every read and write of it has a deadline).
  void run(std::stop_token stop);

 private:
  using Clock = SteadyClock;

  void wake();
  // Sleeps until `until`, stop, or a change of the informers' objects.
  void wait(Clock::time_point until, std::stop_token stop);
  void refresh_peers(const kube::SharedInformer& pods, const kube::SharedInformer& config_maps,
                     ProbeSchedule& schedule, LinkBook& book);
  void read_peers_config_map(const kube::SharedInformer& config_maps);
  // A restarted prober starts from what its Node's annotation says (a restart must not drop
  // the peers it has not measured again yet): each named peer still in the directory, measured
  // less than peer_ttl ago, is taken as measured then.
  void resume_published(LinkBook& book);
  void run_probe(const PlannedProbe& planned, ProbeSchedule& schedule, LinkBook& book);
  void publish_if_due(const LinkBook& book);
  void log_aged_out(const api::NodeLinks& links);

  kube::Client& client_;
  ProberDaemonOptions options_;
  std::shared_ptr<const kube::Logger> logger_;
  std::optional<transport::TcpListener> listener_;
  uint16_t port_ = 0;

  std::mutex mutex_;  // guards changed_
  std::condition_variable_any changed_cv_;
  bool changed_ = true;  // the informers' objects changed since the peers were last computed

  // The loop's own state (its thread only).
  std::map<std::string, ProbePeer> peers_;
  std::optional<api::ProberPeers> cross_;  // the last good peers ConfigMap; nullopt: none
  std::string config_map_version_;         // its resourceVersion when last read ("" absent)
  std::set<std::string> listed_;           // peers named in the latest links()
  std::optional<api::NodeLinks> published_;
  Clock::time_point published_at_;
  Clock::time_point publish_retry_at_;
  std::chrono::milliseconds publish_retry_delay_{0};
  std::mt19937_64 random_;  // the busy retry's jitter (seeded as the schedule is)
};

}  // namespace tessel::prober
