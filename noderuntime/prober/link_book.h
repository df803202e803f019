// What the prober knows of its links and what it publishes of them (api::NodeLinks):
//  - the latest full measurement of each peer; a peer with no successful probe (full or check)
//    for peer_ttl, or max_failures failures in a row, is aged out (left out until it answers
//    again); a check counts as alive but does not change the measurement;
//  - at most max_listed_peers entries, aggregates included: peers of this node's cluster first,
//    by name, then the others by name; the peers that do not fit are aggregated per site ("*"
//    for this cluster's, "<cluster>/*" for another's: api::aggregate_measurements), a site left
//    with one peer lists it by name; fewer are listed when the annotation would exceed
//    api::kMaxLinksAnnotationBytes;
//  - hysteresis: a new value is worth publishing when the peer set changed, a value moved by
//    at least material_change (relative; an RTT also by at least rtt_floor_ms), or what is
//    published is republish_after old (the operator takes measurements older than an hour as
//    missing).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/link_annotations.h"
#include "noderuntime/prober/probe_schedule.h"

namespace tessel::prober {

struct LinkBookOptions {
  // No successful probe (full or check) for this long: aged out.
  std::chrono::seconds peer_ttl{900};
  // Consecutive failures: aged out.
  int max_failures = 3;
  // Entries in the annotation, aggregates included; beyond: aggregated by site.
  size_t max_listed_peers = 256;
  // Hysteresis: a relative change of a rate or RTT below this is not published...
  double material_change = 0.10;
  // ...nor an RTT change below this...
  double rtt_floor_ms = 0.2;
  // ...unless what is published is this old (keeps `at` fresh for the operator's max_age of 1 h).
  std::chrono::seconds republish_after{1200};
};

// Limits of the options (checked by check_link_book_options).
inline constexpr size_t kMaxListedPeers = 2000;  // about 110 bytes each: the annotation's limit
inline constexpr int kMaxFailuresLimit = 1000;
inline constexpr std::chrono::seconds kMaxPeerTtl{24 * 3600};

// Throws ProbeError "prober link book option <name> = <value>: <limit>".
void check_link_book_options(const LinkBookOptions& options);

class LinkBook {
 public:
  // Throws ProbeError for bad options.
  explicit LinkBook(LinkBookOptions options);

  // A peer no longer listed is forgotten; a new one is known, not measured.
  void set_peers(const std::vector<std::string>& peers);
  // Records of a peer not in the set are ignored (it left while its probe ran). record_full
  // throws ProbeError when m.measured_at is not an RFC 3339 time.
  void record_full(const std::string& peer, const api::LinkMeasurement& m,
                   SteadyClock::time_point now);
  void record_check(const std::string& peer, SteadyClock::time_point now);  // alive
  void record_failure(const std::string& peer, SteadyClock::time_point now);

  // The measured peers not aged out, aggregated beyond max_listed_peers.
  api::NodeLinks links(SteadyClock::time_point now) const;

  // Hysteresis: publish `candidate` over `published` (nullopt: nothing published yet, always
  // true) that was published at `published_at`?
  bool should_publish(const std::optional<api::NodeLinks>& published,
                      SteadyClock::time_point published_at, const api::NodeLinks& candidate,
                      SteadyClock::time_point now) const;

 private:
  struct Peer {
    std::optional<api::LinkMeasurement> measurement;
    std::optional<SteadyClock::time_point> alive_at;  // latest successful probe
    int failures = 0;                                 // in a row
  };

  bool listed(const Peer& peer, SteadyClock::time_point now) const;

  LinkBookOptions options_;
  std::map<std::string, Peer> peers_;
};

}  // namespace tessel::prober
